package dkim

import (
	"errors"
	"strings"
)

// errTags: a tag-list that does not follow RFC 6376 §3.2.
var errTags = errors.New("malformed tag list")

// Tags is a parsed tag-list (RFC 6376 §3.2): tag names are case-sensitive,
// values have the folding white space around them removed.
type Tags map[string]string

// ParseTags reads a tag-list: tag-spec *( ";" tag-spec ) [ ";" ], with
// tag-name = ALPHA *( ALPHA / DIGIT / "_" ). A duplicate tag or a
// malformed one makes the whole list invalid (§3.2: "Tags with duplicate
// names MUST NOT occur within a single tag-list").
func ParseTags(s string) (Tags, error) {
	t := Tags{}
	parts := strings.Split(s, ";")
	for i, p := range parts {
		if strings.TrimSpace(unfoldWSP(p)) == "" {
			if i == len(parts)-1 {
				break // the optional final ";"
			}
			return nil, errTags
		}
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, errTags
		}
		k = strings.TrimSpace(unfoldWSP(k))
		if !validTagName(k) {
			return nil, errTags
		}
		if _, dup := t[k]; dup {
			return nil, errTags
		}
		t[k] = strings.TrimSpace(unfoldWSP(v))
	}
	return t, nil
}

func validTagName(k string) bool {
	if k == "" || !(k[0] >= 'a' && k[0] <= 'z' || k[0] >= 'A' && k[0] <= 'Z') {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// unfoldWSP turns line breaks into nothing and tabs into spaces, so
// trimming removes all folding white space.
func unfoldWSP(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return wspReplacer.Replace(s)
}

var wspReplacer = strings.NewReplacer("\r", "", "\n", "", "\t", " ")

// stripWSP removes all white space (base64 values, §3.5 "b=": "Whitespace
// is ignored in this value").
func stripWSP(s string) string {
	if !strings.ContainsAny(s, " \t\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, s)
}

// colonList splits a colon-separated list (h=, key h=, s=, t=) and trims
// each entry.
func colonList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ":") {
		if p = strings.TrimSpace(unfoldWSP(p)); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// WithoutB returns a signature field's raw bytes with the value of its
// b= tag removed, white space around it included (RFC 6376 §3.7: the
// signature is computed as if b= were empty). Everything else stays
// exactly as written; when b= is the last tag the field's line ending
// goes too, which the caller drops anyway (§3.7: "without a trailing
// CRLF").
func WithoutB(field []byte) []byte {
	colon := strings.IndexByte(string(field), ':')
	if colon < 0 {
		return field
	}
	s := string(field)
	pos := colon + 1
	for pos <= len(s) {
		end := strings.IndexByte(s[pos:], ';')
		if end < 0 {
			end = len(s)
		} else {
			end += pos
		}
		spec := s[pos:end]
		if k, _, ok := strings.Cut(spec, "="); ok && strings.TrimSpace(unfoldWSP(k)) == "b" {
			eq := pos + strings.IndexByte(spec, '=') + 1
			return []byte(s[:eq] + s[end:])
		}
		pos = end + 1
	}
	return field
}
