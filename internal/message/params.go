package message

import (
	"sort"
	"strconv"
	"strings"
)

// maxParams bounds the parameters kept per header field, so a hostile
// header cannot make a part description arbitrarily large.
const maxParams = 64

// maxSections bounds RFC 2231 continuation sections per parameter.
const maxSections = 256

// isTokenChar reports whether c may appear in an RFC 2045 §5.1 token.
func isTokenChar(c byte) bool {
	if c <= ' ' || c >= 0x7f {
		return false
	}
	switch c {
	case '(', ')', '<', '>', '@', ',', ';', ':', '\\', '"', '/', '[', ']', '?', '=':
		return false
	}
	return true
}

// skipCFWS skips white space and RFC 5322 comments (nested, with quoted
// pairs) starting at i.
func skipCFWS(s string, i int) int {
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c == '(':
			depth := 0
			for i < len(s) {
				switch s[i] {
				case '\\':
					i++
				case '(':
					depth++
				case ')':
					depth--
				}
				i++
				if depth == 0 {
					break
				}
			}
		default:
			return i
		}
	}
	return i
}

// readToken reads token characters starting at i.
func readToken(s string, i int) (string, int) {
	j := i
	for j < len(s) && isTokenChar(s[j]) {
		j++
	}
	return s[i:j], j
}

// readQuoted reads a quoted-string starting at s[i] == '"' and returns its
// content with quoted pairs undone. An unterminated string runs to the end.
func readQuoted(s string, i int) (string, int) {
	i++ // opening quote
	var b strings.Builder
	start := i
	plain := true
	for i < len(s) {
		c := s[i]
		if c == '"' {
			if plain {
				return s[start:i], i + 1
			}
			return b.String(), i + 1
		}
		if c == '\\' && i+1 < len(s) {
			if plain {
				b.WriteString(s[start:i])
				plain = false
			}
			b.WriteByte(s[i+1])
			i += 2
			continue
		}
		if !plain {
			b.WriteByte(c)
		}
		i++
	}
	if plain {
		return s[start:], i
	}
	return b.String(), i
}

// parseMediaType parses a Content-Type value (RFC 2045 §5.1):
// type "/" subtype *(";" parameter). ok is false when the type is
// syntactically invalid; the caller then applies the default.
func parseMediaType(v string) (typ, sub string, params []Param, ok bool) {
	i := skipCFWS(v, 0)
	typ, i = readToken(v, i)
	i = skipCFWS(v, i)
	if i < len(v) && v[i] == '/' {
		i = skipCFWS(v, i+1)
		sub, i = readToken(v, i)
	}
	if typ == "" || sub == "" {
		return "", "", nil, false
	}
	return strings.ToLower(typ), strings.ToLower(sub), parseParams(v, i), true
}

// parseDisposition parses a Content-Disposition value (RFC 2183 §2).
func parseDisposition(v string) (disp string, params []Param) {
	i := skipCFWS(v, 0)
	disp, i = readToken(v, i)
	return strings.ToLower(disp), parseParams(v, i)
}

// rawParam is a parameter as written, before RFC 2231 assembly.
type rawParam struct {
	name  string // lower case, as written incl. "*N" / "*"
	value string
}

// parseParams parses "; attribute=value" pairs from s[i:] leniently:
// missing semicolons, unquoted values with spaces and unterminated quotes
// are accepted. Names are lower-cased; RFC 2231 continuations and
// extended values are assembled and decoded to UTF-8.
func parseParams(s string, i int) []Param {
	var raw []rawParam
	for i < len(s) && len(raw) < maxParams*4 {
		i = skipCFWS(s, i)
		for i < len(s) && (s[i] == ';' || s[i] == ',') {
			i = skipCFWS(s, i+1)
		}
		if i >= len(s) {
			break
		}
		var name string
		name, i = readToken(s, i)
		i = skipCFWS(s, i)
		if name == "" || i >= len(s) || s[i] != '=' {
			// Junk: skip to the next semicolon.
			j := strings.IndexByte(s[i:], ';')
			if j < 0 {
				break
			}
			i += j + 1
			continue
		}
		i = skipCFWS(s, i+1)
		var value string
		if i < len(s) && s[i] == '"' {
			value, i = readQuoted(s, i)
		} else {
			j := strings.IndexByte(s[i:], ';')
			if j < 0 {
				j = len(s) - i
			}
			value = strings.TrimRight(s[i:i+j], " \t\r\n")
			i += j
		}
		raw = append(raw, rawParam{name: strings.ToLower(name), value: value})
	}
	return assembleParams(raw)
}

// section is one RFC 2231 §3 piece of a parameter value.
type section struct {
	n        int
	extended bool
	value    string
}

// assembleParams joins RFC 2231 continuations (name*0, name*1*, ...) and
// decodes extended values (charset'language'percent-encoded, §4) to UTF-8.
// The result keeps header order by first appearance.
func assembleParams(raw []rawParam) []Param {
	simple := true
	for _, p := range raw {
		if strings.IndexByte(p.name, '*') >= 0 {
			simple = false
			break
		}
	}
	if simple {
		out := make([]Param, 0, min(len(raw), maxParams))
		for _, p := range raw {
			if len(out) >= maxParams {
				break
			}
			if hasParam(out, p.name) {
				continue // the first occurrence wins
			}
			out = append(out, Param{Name: p.name, Value: p.value})
		}
		return out
	}

	var order []string
	plain := map[string]string{}
	sections := map[string][]section{}
	for _, p := range raw {
		base, sec, ok := splitSectionName(p.name)
		if _, seen := plain[base]; !seen {
			if _, seen2 := sections[base]; !seen2 {
				order = append(order, base)
			}
		}
		if !ok {
			if _, dup := plain[base]; !dup {
				plain[base] = p.value
			}
			continue
		}
		if len(sections[base]) < maxSections {
			sec.value = p.value
			sections[base] = append(sections[base], sec)
		}
	}
	out := make([]Param, 0, min(len(order), maxParams))
	for _, name := range order {
		if len(out) >= maxParams {
			break
		}
		if secs, ok := sections[name]; ok {
			out = append(out, Param{Name: name, Value: joinSections(secs)})
			continue
		}
		out = append(out, Param{Name: name, Value: plain[name]})
	}
	return out
}

func hasParam(ps []Param, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// splitSectionName splits "name*3*" into ("name", {n: 3, extended: true}).
// ok is false for a plain name.
func splitSectionName(name string) (string, section, bool) {
	star := strings.IndexByte(name, '*')
	if star < 0 {
		return name, section{}, false
	}
	base, rest := name[:star], name[star+1:]
	if rest == "" {
		return base, section{n: 0, extended: true}, true
	}
	ext := strings.HasSuffix(rest, "*")
	rest = strings.TrimSuffix(rest, "*")
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || n > 9999 {
		return name, section{}, false
	}
	return base, section{n: n, extended: ext}, true
}

// joinSections assembles RFC 2231 §3 sections in numeric order and decodes
// the extended ones (§4): the first extended section may start with
// charset'language'.
func joinSections(secs []section) string {
	sort.SliceStable(secs, func(a, b int) bool { return secs[a].n < secs[b].n })
	var buf []byte
	charset := ""
	for k, s := range secs {
		if k > 0 && s.n == secs[k-1].n {
			continue // duplicate section number: keep the first
		}
		v := s.value
		if s.extended {
			if k == 0 {
				if a := strings.IndexByte(v, '\''); a >= 0 {
					if b := strings.IndexByte(v[a+1:], '\''); b >= 0 {
						charset = v[:a]
						v = v[a+1+b+1:]
					}
				}
			}
			buf = appendPercentDecoded(buf, v)
		} else {
			buf = append(buf, v...)
		}
	}
	return charsetToUTF8(buf, charset)
}

// appendPercentDecoded appends v with %XX escapes decoded; malformed
// escapes are kept literally.
func appendPercentDecoded(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '%' && i+2 < len(v) {
			h, ok1 := unhex(v[i+1])
			l, ok2 := unhex(v[i+2])
			if ok1 && ok2 {
				dst = append(dst, h<<4|l)
				i += 2
				continue
			}
		}
		dst = append(dst, c)
	}
	return dst
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
