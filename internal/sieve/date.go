package sieve

import (
	"fmt"
	"strconv"
	"time"

	"pimail/internal/message"
)

// The date and currentdate tests (RFC 5260 §4, §5).

// dateParts are the date-part names of RFC 5260 §4.2.
var dateParts = map[string]bool{
	"year": true, "month": true, "day": true, "date": true, "julian": true,
	"hour": true, "minute": true, "second": true, "time": true,
	"iso8601": true, "std11": true, "zone": true, "weekday": true,
}

// zoneSpec is the :zone or :originalzone argument.
type zoneSpec struct {
	zone     *str // :zone "+hhmm"
	original bool // :originalzone
}

// location returns the zone to show the date in: the argument of :zone,
// the zone the date was written in for :originalzone, else the local
// zone (RFC 5260 §4.1).
func (z zoneSpec) location(r *run, t time.Time) (*time.Location, bool) {
	switch {
	case z.original:
		return t.Location(), true
	case z.zone != nil:
		return parseZone(r.expand(*z.zone))
	}
	return r.in.Zone, true
}

// parseZone reads "+hhmm" or "-hhmm" (RFC 5260 §4.1).
func parseZone(s string) (*time.Location, bool) {
	if len(s) != 5 || (s[0] != '+' && s[0] != '-') {
		return nil, false
	}
	hh, err1 := strconv.Atoi(s[1:3])
	mm, err2 := strconv.Atoi(s[3:5])
	if err1 != nil || err2 != nil || hh > 23 || mm > 59 {
		return nil, false
	}
	off := hh*3600 + mm*60
	if s[0] == '-' {
		off = -off
	}
	return time.FixedZone(s, off), true
}

// datePart formats one part of t (RFC 5260 §4.2).
func datePart(t time.Time, part string) string {
	switch part {
	case "year":
		return fmt.Sprintf("%04d", t.Year())
	case "month":
		return fmt.Sprintf("%02d", int(t.Month()))
	case "day":
		return fmt.Sprintf("%02d", t.Day())
	case "date":
		return t.Format("2006-01-02")
	case "julian":
		// The Modified Julian Day: days since 1858-11-17.
		epoch := time.Date(1858, 11, 17, 0, 0, 0, 0, time.UTC)
		day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return strconv.Itoa(int(day.Sub(epoch).Hours() / 24))
	case "hour":
		return fmt.Sprintf("%02d", t.Hour())
	case "minute":
		return fmt.Sprintf("%02d", t.Minute())
	case "second":
		return fmt.Sprintf("%02d", t.Second())
	case "time":
		return t.Format("15:04:05")
	case "iso8601":
		return t.Format("2006-01-02T15:04:05-07:00")
	case "std11":
		return t.Format("Mon, 02 Jan 2006 15:04:05 -0700")
	case "zone":
		return t.Format("-0700")
	case "weekday":
		return strconv.Itoa(int(t.Weekday()))
	}
	return ""
}

// dateTest is "date" (RFC 5260 §4): a part of the date in a header field.
// A field that is missing or does not parse as a date gives no value.
type dateTest struct {
	pos    Pos
	zone   zoneSpec
	header str
	part   str
	m      matcher
}

func (t *dateTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	part := lowerASCII(r.expand(t.part))
	var vals []string
	for _, f := range r.headers(r.expand(t.header)) {
		d, ok := message.ParseDate(f.raw)
		if !ok {
			continue
		}
		loc, ok := t.zone.location(r, d)
		if !ok || !dateParts[part] {
			continue
		}
		vals = append(vals, datePart(d.In(loc), part))
		break // RFC 5260 §4: the first occurrence of the field
	}
	return r.match(&t.m, vals), nil
}

// currentDateTest is "currentdate" (RFC 5260 §5): a part of the time of
// delivery.
type currentDateTest struct {
	pos  Pos
	zone zoneSpec
	part str
	m    matcher
}

func (t *currentDateTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	part := lowerASCII(r.expand(t.part))
	loc, ok := t.zone.location(r, r.in.Now)
	if !ok || !dateParts[part] {
		return r.match(&t.m, nil), nil
	}
	return r.match(&t.m, []string{datePart(r.in.Now.In(loc), part)}), nil
}
