package spf

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// checkMacroString checks the macro grammar of RFC 7208 §7.1 without
// expanding: "%" only as "%%", "%_", "%-" or "%{" letter transformers
// delimiters "}", and the letters c, r and t only in explanations (exp).
func checkMacroString(s string, exp bool) error {
	_, err := expandMacros(context.Background(), s, exp, nil)
	return err
}

// expandMacros expands a macro-string (§7). With e nil only the syntax is
// checked. The letters: s sender, l its local part, o its domain, d the
// current domain, i the client address (IPv6 as dotted nibbles, §7.3),
// p its validated name, v "in-addr" or "ip6", h the HELO name, and in
// explanations c the client address as written, r this host, t the time.
// An upper-case letter URL-escapes the value (§7.3).
func expandMacros(ctx context.Context, s string, exp bool, e *evaluation) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			// macro-literal = %x21-24 / %x26-7E; an explanation is
			// text, where spaces are literal too.
			if (c < 0x21 || c > 0x7e) && !(exp && c == ' ') {
				return "", syntaxError("character %#x in macro-string", c)
			}
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			return "", syntaxError("%% at the end of %q", s)
		}
		i++
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case '_':
			b.WriteByte(' ')
		case '-':
			b.WriteString("%20")
		case '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", syntaxError("unterminated macro in %q", s)
			}
			v, err := expandOne(ctx, s[i+1:i+end], exp, e)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += end
		default:
			return "", syntaxError("bad macro %q", s[i-1:i+1])
		}
	}
	return b.String(), nil
}

// expandOne expands the inside of "%{...}": macro-letter transformers
// *delimiter, transformers = *DIGIT [ "r" ] (§7.1, §7.3).
func expandOne(ctx context.Context, m string, exp bool, e *evaluation) (string, error) {
	if m == "" {
		return "", syntaxError("empty macro")
	}
	letter := m[0]
	lower := letter | 0x20
	if !strings.ContainsRune("slodiphcrtv", rune(lower)) || !isAlpha(letter) {
		return "", syntaxError("unknown macro letter %q", letter)
	}
	if !exp && strings.ContainsRune("crt", rune(lower)) {
		return "", syntaxError("macro %q only allowed in explanations", letter)
	}
	rest := m[1:]
	j := 0
	for j < len(rest) && isDigit(rest[j]) {
		j++
	}
	keep := -1
	if j > 0 {
		n, err := strconv.Atoi(rest[:j])
		if err != nil || n == 0 || n > 128 {
			// §7.3: the number of parts to keep must be nonzero.
			return "", syntaxError("bad macro transformer %q", m)
		}
		keep = n
	}
	rest = rest[j:]
	reverse := false
	if rest != "" && (rest[0] == 'r' || rest[0] == 'R') {
		reverse = true
		rest = rest[1:]
	}
	delims := rest
	for k := 0; k < len(delims); k++ {
		if !strings.ContainsRune(".-+,/_=", rune(delims[k])) {
			return "", syntaxError("bad macro delimiter in %q", m)
		}
	}
	if e == nil {
		return "", nil
	}
	v := e.macroValue(ctx, lower)
	if delims == "" {
		delims = "."
	}
	if keep > 0 || reverse || delims != "." {
		// Split at any delimiter, reverse, keep the rightmost parts, join
		// with "." (§7.3).
		parts := splitAny(v, delims)
		if reverse {
			for a, z := 0, len(parts)-1; a < z; a, z = a+1, z-1 {
				parts[a], parts[z] = parts[z], parts[a]
			}
		}
		if keep > 0 && keep < len(parts) {
			parts = parts[len(parts)-keep:]
		}
		v = strings.Join(parts, ".")
	}
	if letter != lower {
		v = escapeURL(v)
	}
	return v, nil
}

// splitAny splits s at every delimiter, keeping empty parts.
func splitAny(s, delims string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(delims, s[i]) >= 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// escapeURL escapes every octet that RFC 3986 §2.3 does not call
// unreserved (ALPHA, DIGIT, "-", ".", "_", "~") as %XX (§7.3).
func escapeURL(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// macroValue is the value of one macro letter for this evaluation.
func (e *evaluation) macroValue(ctx context.Context, letter byte) string {
	switch letter {
	case 's':
		return e.sender
	case 'l':
		return localPart(e.sender)
	case 'o':
		return senderDomain(e.sender)
	case 'd':
		return e.domain
	case 'i':
		return dottedIP(e.c.req.IP)
	case 'p':
		return e.c.validatedName(ctx, e.domain)
	case 'v':
		if e.c.req.IP.Is4() {
			return "in-addr"
		}
		return "ip6"
	case 'h':
		return e.c.req.Helo
	case 'c':
		return e.c.req.IP.String()
	case 'r':
		if e.c.req.Receiver != "" {
			return e.c.req.Receiver
		}
		return "unknown"
	case 't':
		now := e.c.req.Now
		if now.IsZero() {
			now = time.Now()
		}
		return strconv.FormatInt(now.Unix(), 10)
	}
	return ""
}

// localPart and senderDomain split the sender at its last "@".
func localPart(sender string) string {
	if i := strings.LastIndexByte(sender, '@'); i >= 0 {
		return sender[:i]
	}
	return sender
}

func senderDomain(sender string) string {
	if i := strings.LastIndexByte(sender, '@'); i >= 0 {
		return sender[i+1:]
	}
	return sender
}
