package webmail

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// visible shows a line of text that came with a message with every
// control, bidirectional or other format character replaced by a visible
// "[U+XXXX]" marker (tabs become spaces, invalid UTF-8 U+FFFD), so that
// nothing in it hides or reorders what is around it. It is the rule of
// message.Visible (issue 22), which replaces it once that lands.
func visible(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case r == utf8.RuneError:
			b.WriteRune(r)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 ||
			(unicode.Is(unicode.Cf, r) && r != 0x200c && r != 0x200d):
			fmt.Fprintf(&b, "[U+%04X]", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// visibleLines is visible for text of many lines: each line (CR LF or LF
// ended) shown through visible, joined by LF.
func visibleLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = visible(strings.TrimSuffix(l, "\r"))
	}
	return strings.Join(lines, "\n")
}
