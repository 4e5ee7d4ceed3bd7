package spam

import (
	"bytes"
	"fmt"
	"strings"
)

// Header field names this filter writes. Fields of these names (and any
// other X-Spam-*) that arrive from outside are removed before delivery, so
// that a sender cannot pre-mark a message as clean.
const (
	HeaderStatus = "X-Spam-Status"
	HeaderScore  = "X-Spam-Score"
)

// FormatHeaders returns the X-Spam-Status and X-Spam-Score fields for a
// verdict, folded (RFC 5322 §2.2.3) and CRLF-terminated:
//
//	X-Spam-Status: Yes, score=7.40 junk=5.00 action=junk bayes=0.998
//		tests=BAYES_99=7.84,HTML_ONLY=0.70
//	X-Spam-Score: 7.40
func FormatHeaders(v Verdict, junkThreshold float64) string {
	yes := "No"
	if v.Action != Accept {
		yes = "Yes"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s, score=%.2f junk=%.2f action=%s", HeaderStatus, yes, v.Score, junkThreshold, v.Action)
	if v.Bayes >= 0 {
		fmt.Fprintf(&b, " bayes=%.3f", v.Bayes)
	} else {
		b.WriteString(" bayes=untrained")
	}
	line := len("\ttests=")
	b.WriteString("\r\n\ttests=")
	for i, h := range v.Hits {
		item := fmt.Sprintf("%s=%.2f", h.Name, h.Score)
		if i > 0 {
			if line+len(item)+1 > 76 {
				b.WriteString(",\r\n\t")
				line = 1
			} else {
				b.WriteByte(',')
				line++
			}
		}
		b.WriteString(item)
		line += len(item)
	}
	if len(v.Hits) == 0 {
		b.WriteString("none")
	}
	fmt.Fprintf(&b, "\r\n%s: %.2f\r\n", HeaderScore, v.Score)
	return b.String()
}

// StripHeaders removes the top-level X-Spam-* fields (see StripFields).
func StripHeaders(raw []byte) []byte { return StripFields(raw, "X-Spam-") }

// StripFields removes the top-level header fields whose names start with
// one of the prefixes (any case), with their continuation lines. It
// returns raw itself when there are none. Lines may end in CRLF or LF; the
// header ends at the first empty line (RFC 5322 §2.1).
func StripFields(raw []byte, prefixes ...string) []byte {
	var out []byte
	pos, dropping := 0, false
	for pos < len(raw) {
		end := bytes.IndexByte(raw[pos:], '\n')
		if end < 0 {
			end = len(raw)
		} else {
			end += pos + 1
		}
		line := raw[pos:end]
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			break // end of header
		}
		if line[0] != ' ' && line[0] != '\t' {
			dropping = false
			for _, p := range prefixes {
				if len(line) >= len(p) && bytes.EqualFold(line[:len(p)], []byte(p)) {
					dropping = true
				}
			}
			if dropping && out == nil {
				out = append(make([]byte, 0, len(raw)), raw[:pos]...)
			}
		}
		if out != nil && !dropping {
			out = append(out, line...)
		}
		pos = end
	}
	if out == nil {
		return raw
	}
	return append(out, raw[pos:]...)
}
