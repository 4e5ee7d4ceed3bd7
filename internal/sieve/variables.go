package sieve

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Strings and variables (RFC 5229).

// maxVarLen bounds the value of one variable (RFC 5229 §3 lets
// implementations limit it; they must allow at least 4000 octets); a
// longer value is cut at a character boundary.
const maxVarLen = 64 << 10

// str is a string argument: a literal, or, with the variables extension,
// a template of literal parts and variable references expanded at run
// time (RFC 5229 §3).
type str struct {
	lit   string
	parts []strPart // nil: lit is the value
}

type strPart struct {
	lit   string
	name  string // variable name, lower case; "" for a literal part
	match int    // match variable number when name is "", isMatch set
	isVar bool
	isNum bool
}

// strList is a string-list argument.
type strList []str

func (r *run) expand(s str) string {
	if s.parts == nil {
		return s.lit
	}
	var b strings.Builder
	for _, p := range s.parts {
		switch {
		case !p.isVar:
			b.WriteString(p.lit)
		case p.isNum:
			if p.match < len(r.matchVars) {
				b.WriteString(r.matchVars[p.match])
			}
		default:
			b.WriteString(r.vars[p.name])
		}
	}
	return b.String()
}

// literals returns the values of a list with no variable reference, nil
// when it has one.
func (l strList) literals() []string {
	out := make([]string, len(l))
	for i, s := range l {
		if s.parts != nil {
			return nil
		}
		out[i] = s.lit
	}
	return out
}

func (r *run) expandList(l strList) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = r.expand(s)
	}
	return out
}

// parseTemplate splits s at its variable references "${name}" and
// "${number}" (RFC 5229 §3). Anything else that starts with "${", such as
// a reference to an unknown namespace, is kept literally.
func parseTemplate(s string) str {
	if !strings.Contains(s, "${") {
		return str{lit: s}
	}
	var parts []strPart
	var lit strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "${") {
			if end := strings.IndexByte(s[i+2:], '}'); end >= 0 {
				ref := s[i+2 : i+2+end]
				if p, ok := varRef(ref); ok {
					if lit.Len() > 0 {
						parts = append(parts, strPart{lit: lit.String()})
						lit.Reset()
					}
					parts = append(parts, p)
					i += end + 3
					continue
				}
			}
		}
		lit.WriteByte(s[i])
		i++
	}
	if parts == nil {
		return str{lit: s}
	}
	if lit.Len() > 0 {
		parts = append(parts, strPart{lit: lit.String()})
	}
	return str{lit: s, parts: parts}
}

// varRef parses the inside of "${...}": an identifier or a number.
func varRef(ref string) (strPart, bool) {
	if ref == "" {
		return strPart{}, false
	}
	if ref[0] >= '0' && ref[0] <= '9' {
		n, err := strconv.Atoi(ref)
		if err != nil || n > 1000 {
			return strPart{}, false
		}
		return strPart{isVar: true, isNum: true, match: n}, true
	}
	if !validIdent(ref) {
		return strPart{}, false
	}
	return strPart{isVar: true, name: lowerASCII(ref)}, true
}

func validIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

// decodeEncodedCharacters replaces "${hex: 41 42}" and "${unicode: 263A}"
// with the characters they encode (RFC 5228 §2.4.2.4). A malformed
// sequence is left as it is; a code point that is not a Unicode scalar
// value is an error.
func decodeEncodedCharacters(s string) (string, bool) {
	if !strings.Contains(s, "${") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "${") {
			if end := strings.IndexByte(s[i:], '}'); end >= 0 {
				inner := s[i+2 : i+end]
				kind, body, ok := strings.Cut(inner, ":")
				kind = strings.ToLower(strings.TrimSpace(kind))
				if ok && (kind == "hex" || kind == "unicode") {
					dec, valid, good := decodeCharSeq(kind, body)
					if !valid {
						return "", false
					}
					if good {
						b.WriteString(dec)
						i += end + 1
						continue
					}
				}
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String(), true
}

// decodeCharSeq decodes the blank-separated hex numbers of one encoded
// sequence. good is false for a malformed one (left as written); valid is
// false for a unicode value outside the scalar values.
func decodeCharSeq(kind, body string) (dec string, valid, good bool) {
	fields := strings.Fields(body)
	var b strings.Builder
	for _, f := range fields {
		n, err := strconv.ParseUint(f, 16, 32)
		if err != nil || (kind == "hex" && n > 0xff) {
			return "", true, false
		}
		if kind == "hex" {
			b.WriteByte(byte(n))
			continue
		}
		if n > unicode.MaxRune || (n >= 0xd800 && n <= 0xdfff) {
			return "", false, false
		}
		b.WriteRune(rune(n))
	}
	return b.String(), true, true
}

// setCmd is "set" (RFC 5229 §4) with its modifiers, applied from the
// highest precedence to the lowest.
type setCmd struct {
	pos   Pos
	name  string
	value str
	mods  []string // sorted by precedence, highest first
}

// modPrecedence are the modifiers of set and their precedence (RFC 5229
// §4.1); two modifiers of one precedence are an error.
var modPrecedence = map[string]int{
	"lower": 40, "upper": 40, "lowerfirst": 30, "upperfirst": 30,
	"quotewildcard": 20, "length": 10,
}

func (c *setCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	v := r.expand(c.value)
	for _, m := range c.mods {
		switch m {
		case "lower":
			v = strings.ToLower(v)
		case "upper":
			v = strings.ToUpper(v)
		case "lowerfirst":
			v = mapFirst(v, unicode.ToLower)
		case "upperfirst":
			v = mapFirst(v, unicode.ToUpper)
		case "quotewildcard":
			v = quoteWildcards(v)
		case "length":
			v = strconv.Itoa(utf8.RuneCountInString(v))
		}
	}
	r.setVar(c.name, v)
	return nil
}

func (r *run) setVar(name, v string) {
	if len(v) > maxVarLen {
		cut := maxVarLen
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut]
	}
	if r.vars == nil {
		r.vars = map[string]string{}
	}
	r.vars[name] = v
}

func mapFirst(s string, f func(rune) rune) string {
	c, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(f(c)) + s[n:]
}

// quoteWildcards escapes "*", "?" and "\" for use in a :matches key.
func quoteWildcards(s string) string {
	if !strings.ContainsAny(s, `*?\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '*' || s[i] == '?' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// stringTest is "string" (RFC 5229 §5): the source strings against the
// keys. An empty source string counts as absent for :count.
type stringTest struct {
	pos    Pos
	source strList
	m      matcher
}

func (t *stringTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	src := r.expandList(t.source)
	if t.m.typ == matchCount {
		kept := src[:0:0]
		for _, s := range src {
			if s != "" {
				kept = append(kept, s)
			}
		}
		src = kept
	}
	return r.match(&t.m, src), nil
}
