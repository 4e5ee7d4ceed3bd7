package message

import (
	"net/mail"
	"strings"
	"time"
)

// dateLayouts are the broken Date: forms seen in real mail, tried after
// net/mail.ParseDate (RFC 5322 §3.3) fails, on a normalised value (comments
// and the day of the week removed, white space collapsed).
var dateLayouts = []string{
	"2 Jan 2006 15:04:05 -0700",
	"2 Jan 2006 15:04:05 MST",
	"2 Jan 2006 15:04 -0700",
	"2 Jan 2006 15:04-0700",
	"2 Jan 2006 15:04:05-0700",
	"2 Jan 2006 15:04 MST",
	"2 Jan 06 15:04:05 -0700",
	"2 Jan 06 15:04:05 MST",
	"2 Jan 06 15:04 -0700",
	"2 January 2006 15:04:05 -0700",
	"2 January 2006 15:04:05 MST",
	"2-Jan-2006 15:04:05 -0700",
	"2 Jan 2006 15:04:05 -07:00",
	"2 Jan 2006 15:04:05",
	"2 Jan 2006 15:04",
	"2 Jan 06 15:04:05",
	"Jan 2 15:04:05 2006",       // asctime
	"Jan 2 15:04:05 MST 2006",   // date(1)
	"Jan 2 15:04:05 -0700 2006", // variants of date(1)
	"Jan 2 2006 15:04:05 -0700",
	"Jan 2, 2006 15:04:05 -0700",
	"January 2, 2006 3:04 PM",
	"January 2, 2006 15:04:05 -0700",
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02 15:04:05 -0700",
	"2006-01-02 15:04:05 MST",
	"2006-01-02 15:04:05",
	"1/2/2006 15:04:05 -0700",
	"1/2/2006 3:04:05 PM",
}

// ParseDate parses a Date: header value leniently and reports whether it
// succeeded. Values without a zone are taken as UTC.
func ParseDate(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	// net/mail tries its layouts without the day of the week first, and
	// each failed try allocates an error: with "Tue, " left on, the
	// common form took 12 failures before it parsed. The day of the week
	// is redundant (RFC 5322 §3.3) and time.Parse never checks it anyway.
	if t, err := mail.ParseDate(withoutDayName(s)); err == nil {
		return t, true
	}
	n := normalizeDate(s)
	if n == "" {
		return time.Time{}, false
	}
	if t, err := mail.ParseDate(n); err == nil {
		return t, true
	}
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, n); err == nil {
			return t, true
		}
	}
	// A numeric zone followed by a zone name ("-0700 PDT" without the
	// parentheses, "+0000 GMT"): drop the name and retry.
	if i := strings.LastIndexByte(n, ' '); i > 0 {
		m := n[:i]
		for _, layout := range dateLayouts {
			if t, err := time.Parse(layout, m); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// withoutDayName returns s without a leading "Tue, " (any English day
// name of three letters, in any case).
func withoutDayName(s string) string {
	if len(s) < 5 || s[3] != ',' {
		return s
	}
	for _, d := range []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"} {
		if strings.EqualFold(s[:3], d) {
			return strings.TrimLeft(s[4:], " \t")
		}
	}
	return s
}

// normalizeDate removes comments, the day of the week and stray
// punctuation, and collapses white space.
func normalizeDate(s string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s) && i < 256; i++ {
		c := s[i]
		switch {
		case c == '(':
			depth++
		case c == ')':
			if depth > 0 {
				depth--
			}
		case depth > 0:
		case c == '\t' || c == '\r' || c == '\n':
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	fields := strings.Fields(b.String())
	if len(fields) > 0 {
		w := strings.TrimRight(fields[0], ",.")
		if isWeekday(w) {
			fields = fields[1:]
		} else if i := strings.IndexByte(fields[0], ','); i > 0 && isWeekday(fields[0][:i]) {
			// "Mon,2 Jan 2006"
			fields[0] = fields[0][i+1:]
		}
	}
	for i, f := range fields {
		if i > 0 && strings.HasSuffix(f, ",") && len(f) > 1 && f[0] >= '0' && f[0] <= '9' && len(f) <= 3 {
			continue // "Jan 2, 2006": keep the comma for its layout
		}
		fields[i] = strings.TrimRight(f, ".")
	}
	n := strings.Join(fields, " ")
	// "09 : 55 : 06" (RFC 5322 §4.3 allows CFWS around the colons).
	if strings.Contains(n, " :") || strings.Contains(n, ": ") {
		n = strings.ReplaceAll(n, " : ", ":")
		n = strings.ReplaceAll(n, ": ", ":")
		n = strings.ReplaceAll(n, " :", ":")
	}
	return n
}

func isWeekday(w string) bool {
	if len(w) < 3 {
		return false
	}
	switch strings.ToLower(w[:3]) {
	case "mon", "tue", "wed", "thu", "fri", "sat", "sun":
		return true
	}
	return false
}
