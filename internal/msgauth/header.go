package msgauth

import (
	"bytes"
	"strings"
)

// maxHeaderFields bounds how many header fields are looked at; a message
// with more is read only that far (the rest cannot change a verdict that
// the first thousand fields did not decide).
const maxHeaderFields = 1000

// field is one header field of a message (RFC 5322 §2.2) as it appears in
// the raw bytes: [start, end) covers its name, value and folded lines,
// including the final line ending.
type field struct {
	name       string // as written
	value      string // unfolded (CRLF before WSP removed), untrimmed
	start, end int
}

// headerFields returns the fields of raw's header, in order, up to the
// empty line. Lines that are neither a field nor a continuation are
// skipped over as part of the field before them.
func headerFields(raw []byte) []field {
	var out []field
	pos := 0
	for pos < len(raw) && len(out) < maxHeaderFields {
		end := lineEnd(raw, pos)
		line := raw[pos:end]
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			break // the empty line ends the header
		}
		start := pos
		pos = end
		for pos < len(raw) && (raw[pos] == ' ' || raw[pos] == '\t') {
			pos = lineEnd(raw, pos)
		}
		whole := raw[start:pos]
		colon := bytes.IndexByte(whole, ':')
		if colon <= 0 || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		out = append(out, field{
			name:  string(bytes.TrimRight(whole[:colon], " \t")),
			value: unfold(whole[colon+1:]),
			start: start,
			end:   pos,
		})
	}
	return out
}

// hasFieldLine reports whether a line of raw's header (up to the empty
// line, as headerFields reads it) starts with name, in any case: false
// means that headerFields finds no field called name. It copies nothing,
// where headerFields copies every field; most messages have no field a
// caller looks for.
func hasFieldLine(raw []byte, name string) bool {
	for pos := 0; pos < len(raw); {
		end := lineEnd(raw, pos)
		line := raw[pos:end]
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return false
		}
		if len(line) >= len(name) && strings.EqualFold(string(line[:len(name)]), name) {
			return true
		}
		pos = end
	}
	return false
}

// lineEnd returns the index just after the line starting at pos.
func lineEnd(raw []byte, pos int) int {
	if i := bytes.IndexByte(raw[pos:], '\n'); i >= 0 {
		return pos + i + 1
	}
	return len(raw)
}

// unfold removes the line breaks of a folded field body (RFC 5322 §2.2.3).
func unfold(b []byte) string {
	s := string(b)
	s = strings.ReplaceAll(s, "\r\n", "")
	s = strings.ReplaceAll(s, "\n", "")
	return strings.TrimRight(s, "\r")
}

// removeFields returns raw without the fields for which drop is true. It
// returns raw itself when nothing is dropped.
func removeFields(raw []byte, drop func(f field) bool) []byte {
	var out []byte
	last := 0
	for _, f := range headerFields(raw) {
		if !drop(f) {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(raw))
		}
		out = append(out, raw[last:f.start]...)
		last = f.end
	}
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// tagList parses a DKIM tag-list (RFC 6376 §3.2) into a map; names are
// case-sensitive, white space around names and values is dropped. Later
// duplicates are ignored (the verifier rejects such a signature anyway).
func tagList(s string) map[string]string {
	tags := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, dup := tags[k]; dup || k == "" {
			continue
		}
		tags[k] = strings.TrimSpace(v)
	}
	return tags
}
