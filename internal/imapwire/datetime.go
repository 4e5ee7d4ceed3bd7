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
