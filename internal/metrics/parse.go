package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Sample is one line of the text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseText reads the text format 0.0.4 (what WriteText writes, and what
// any Prometheus exporter serves): comments and empty lines are skipped,
// timestamps ignored. Lines are limited to 64 KiB.
func ParseText(r io.Reader) ([]Sample, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var out []Sample
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

func parseSample(line string) (Sample, error) {
	s := Sample{}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		labels, n, err := parseLabels(rest)
		if err != nil {
			return s, err
		}
		s.Labels = labels
		rest = rest[n:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 || len(f) > 2 {
		return s, fmt.Errorf("malformed sample %q", line)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("value of %s: %w", s.Name, err)
	}
	s.Value = v
	return s, nil
}

// parseLabels parses {a="x",b="y"} and returns the bytes consumed.
func parseLabels(s string) (map[string]string, int, error) {
	labels := map[string]string{}
	i := 1
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i < len(s) && s[i] == '}' {
			return labels, i + 1, nil
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq <= 0 || i+eq+1 >= len(s) || s[i+eq+1] != '"' {
			return nil, 0, fmt.Errorf("malformed labels in %q", s)
		}
		name := strings.TrimSpace(s[i : i+eq])
		i += eq + 2
		var b strings.Builder
		for {
			if i >= len(s) {
				return nil, 0, fmt.Errorf("unterminated label value in %q", s)
			}
			c := s[i]
			if c == '"' {
				i++
				break
			}
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
			} else {
				b.WriteByte(c)
			}
			i++
		}
		labels[name] = b.String()
	}
}

// Sum adds the values of the samples named name whose labels include all
// of match.
func Sum(samples []Sample, name string, match map[string]string) float64 {
	var t float64
	for _, s := range samples {
		if s.Name == name && matches(s.Labels, match) {
			t += s.Value
		}
	}
	return t
}

// ByLabel adds the values of the samples named name per value of label.
func ByLabel(samples []Sample, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.Name == name {
			out[s.Labels[label]] += s.Value
		}
	}
	return out
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Quantile estimates the q-quantile (0 < q < 1) of the histogram name
// from its cumulative _bucket samples, interpolating linearly inside the
// bucket as Prometheus' histogram_quantile does. It returns NaN when the
// histogram is empty; a quantile in the +Inf bucket returns the highest
// finite bound.
func Quantile(samples []Sample, name string, q float64) float64 {
	type bucket struct{ le, count float64 }
	var bs []bucket
	for _, s := range samples {
		if s.Name != name+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(s.Labels["le"], 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, s.Value})
	}
	if len(bs) == 0 {
		return math.NaN()
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	total := bs[len(bs)-1].count
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	for i, b := range bs {
		if b.count < rank {
			continue
		}
		if math.IsInf(b.le, 1) {
			if i == 0 {
				return math.NaN()
			}
			return bs[i-1].le
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = bs[i-1].le, bs[i-1].count
		}
		if b.count == below {
			return b.le
		}
		return lo + (b.le-lo)*(rank-below)/(b.count-below)
	}
	return bs[len(bs)-1].le
}
