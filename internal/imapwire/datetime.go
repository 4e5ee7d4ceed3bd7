package imapwire

import (
	"errors"
	"strings"
	"time"
)

var months = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

func parseMonth(s string) (time.Month, bool) {
	for i, m := range months {
		if strings.EqualFold(m, s) {
			return time.Month(i + 1), true
		}
	}
	return 0, false
}

// ParseDate parses a search date, "d-Mon-yyyy" (RFC 9051 §9 date-text).
// The result is midnight UTC of that day; callers compare calendar days.
func ParseDate(s string) (time.Time, error) {
	parts := strings.Split(s, "-")
	if len(parts) != 3 || len(parts[0]) < 1 || len(parts[0]) > 2 || len(parts[2]) != 4 {
		return time.Time{}, errors.New("invalid date")
	}
	day, err := ParseNumber(parts[0])
	if err != nil || day < 1 || day > 31 {
		return time.Time{}, errors.New("invalid date")
	}
	mon, ok := parseMonth(parts[1])
	if !ok {
		return time.Time{}, errors.New("invalid date")
	}
	year, err := ParseNumber(parts[2])
	if err != nil {
		return time.Time{}, errors.New("invalid date")
	}
	return time.Date(int(year), mon, int(day), 0, 0, 0, 0, time.UTC), nil
}

// ParseDateTime parses an APPEND date-time, "dd-Mon-yyyy hh:mm:ss +zzzz"
// where the day may have a leading space (RFC 9051 §9 date-time).
func ParseDateTime(s string) (time.Time, error) {
	s = strings.TrimLeft(s, " ")
	for _, layout := range []string{"2-Jan-2006 15:04:05 -0700", "02-Jan-2006 15:04:05 -0700"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("invalid date-time")
}

// FormatDateTime formats an INTERNALDATE (RFC 9051 §9 date-time).
func FormatDateTime(t time.Time) string {
	return t.Format("02-Jan-2006 15:04:05 -0700")
}

// AppendDateTime appends t as FormatDateTime formats it, without the
// layout interpretation of time.Format.
func AppendDateTime(b []byte, t time.Time) []byte {
	year, mon, day := t.Date()
	hour, min, sec := t.Clock()
	_, off := t.Zone()
	if year < 0 || year > 9999 {
		return append(b, FormatDateTime(t)...) // not a 4-digit year: as time.Format writes it
	}
	two := func(b []byte, n int) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }
	b = two(b, day)
	b = append(b, '-')
	b = append(b, months[mon-1]...)
	b = append(b, '-')
	b = two(b, year/100)
	b = two(b, year%100)
	b = append(b, ' ')
	b = two(b, hour)
	b = append(b, ':')
	b = two(b, min)
	b = append(b, ':')
	b = two(b, sec)
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	off /= 60 // minutes; seconds of an offset are dropped, as time.Format does
	b = append(b, ' ', sign)
	b = two(b, off/60%100)
	return two(b, off%60)
}
