package message

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible returns s for display with every character that is invisible
// or changes how the text around it is shown replaced by a visible
// marker "[U+XXXX]": C0 and C1 controls (ESC, BEL, CR, LF, NUL…),
// bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
// U+2066–U+2069, the Trojan Source set of CVE-2021-42574), the line and
// paragraph separators U+2028 and U+2029, and other format characters
// (Unicode category Cf: U+200B, U+FEFF, U+00AD…). Zero-width joiner and
// non-joiner stay: scripts and emoji need them. A tab is a space, and
// invalid UTF-8 is U+FFFD. "invoice\u202Efdp.exe" shows as
// "invoice[U+202E]fdp.exe", not as "invoiceexe.pdf".
//
// Every view of text that came with a message (subjects, names,
// addresses, file names, in lists, pages, titles, compose forms and the
// admin's logs) shows it through Visible.
func Visible(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError && !hidden(r) {
				i += n
				continue
			}
		}
		break
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case r == utf8.RuneError:
			b.WriteRune(r)
		case hidden(r):
			fmt.Fprintf(&b, "[U+%04X]", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hidden reports whether r is one of the characters Visible marks.
func hidden(r rune) bool {
	switch {
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		return true
	case r == 0x200c || r == 0x200d:
		return false
	case r == 0x2028 || r == 0x2029:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}
