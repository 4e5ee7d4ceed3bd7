package metrics

import (
	"bufio"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// ContentType is the media type of the text exposition format 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the registry at GET (and HEAD) in the text format.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Cache-Control", "no-store")
		r.WriteText(w)
	})
}

// Handler serves the Default registry.
func Handler() http.Handler { return Default.Handler() }

// WriteText writes every family in the text format: HELP and TYPE lines,
// then one line per sample, families in name order and series in label
// order, so that the output is stable.
func (r *Registry) WriteText(w io.Writer) error {
	fs, collectors := r.sorted()
	for _, c := range collectors {
		c()
	}
	bw := bufio.NewWriter(w)
	for _, f := range fs {
		writeFamily(bw, f)
	}
	return bw.Flush()
}

func writeFamily(w *bufio.Writer, f *family) {
	f.mu.RLock()
	ss := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		ss = append(ss, s)
	}
	f.mu.RUnlock()
	if f.fn == nil && len(ss) == 0 {
		return // a vector nobody has used yet
	}
	w.WriteString("# HELP " + f.name + " " + escapeHelp(f.help) + "\n")
	w.WriteString("# TYPE " + f.name + " " + string(f.kind) + "\n")
	if f.fn != nil {
		writeSample(w, f.name, nil, nil, "", "", f.fn())
		return
	}
	slices.SortFunc(ss, func(a, b *series) int { return slices.Compare(a.values, b.values) })
	for _, s := range ss {
		switch f.kind {
		case kindCounter:
			writeSample(w, f.name, f.labels, s.values, "", "", float64(s.c.Value()))
		case kindGauge:
			writeSample(w, f.name, f.labels, s.values, "", "", s.g.Value())
		case kindHistogram:
			writeHistogram(w, f, s)
		}
	}
}

// writeHistogram writes the cumulative _bucket series (le inclusive, the
// last one +Inf), _sum and _count.
func writeHistogram(w *bufio.Writer, f *family, s *series) {
	h := s.h
	var cum uint64
	counts := make([]uint64, len(h.counts))
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
	}
	for i, c := range counts {
		cum += c
		le := "+Inf"
		if i < len(h.upper) {
			le = formatFloat(h.upper[i])
		}
		writeSample(w, f.name+"_bucket", f.labels, s.values, "le", le, float64(cum))
	}
	writeSample(w, f.name+"_sum", f.labels, s.values, "", "", h.sum.Value())
	// _count equals the +Inf bucket, read in the same pass.
	writeSample(w, f.name+"_count", f.labels, s.values, "", "", float64(cum))
}

func writeSample(w *bufio.Writer, name string, labels, values []string, extraName, extraValue string, v float64) {
	w.WriteString(name)
	if len(labels) > 0 || extraName != "" {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l + `="` + escapeLabel(values[i]) + `"`)
		}
		if extraName != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(extraName + `="` + escapeLabel(extraValue) + `"`)
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

// formatFloat writes a sample value: Go float syntax, with +Inf, -Inf and
// NaN spelt as the format wants.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// In HELP text, backslash and line feed are escaped; in label values also
// the double quote.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }
