package message

import "bytes"

// MaxHeaderFields is the most header fields a message may have. Mail with
// more is refused at delivery (internal/delivery): below the limit every
// consumer reads every field, so no verdict is made on part of a header
// that a person or a client reads whole. Real mail has a few dozen; a
// thousand Received fields would be a loop stopped long before (RFC 5321
// §6.3).
const MaxHeaderFields = 1000

// RawField is one header field as ScanFields yields it: slices of the
// scanned bytes, valid as long as they are, copied nowhere.
type RawField struct {
	// Name is the field name as written, without white space before
	// the colon (RFC 5322 §4.5.8).
	Name []byte
	// Value is everything after the colon up to the final line ending,
	// still folded.
	Value []byte
	// [Start, End) is the whole field in the scanned bytes: name, colon,
	// value, continuation lines and the final line ending.
	Start, End int
}

// Is reports whether the field is called name (ASCII case-insensitive,
// RFC 5322 §1.2.2).
func (f RawField) Is(name string) bool { return equalFoldASCII(f.Name, name) }

// Unfolded returns the value unfolded (RFC 5322 §2.2.3) and trimmed.
func (f RawField) Unfolded() string { return unfold(f.Value) }

// ScanFields calls fn for each header field of raw, in order, until fn
// returns false or the header ends, and returns the offset of the body:
// after the empty line that ends the header (RFC 5322 §2.1), or len(raw)
// when there is none. Lines may end in CRLF or a bare LF. A line that is
// neither a field nor a continuation (an mbox "From " line, junk) carries
// no field and is skipped. This is the one reading of a header that every
// part of pimail shares: the DMARC check, the index, IMAP and the webmail
// see the same fields.
func ScanFields(raw []byte, fn func(RawField) bool) (bodyStart int) {
	h := headerReader{buf: raw, end: len(raw)}
	for {
		f, ok := h.next()
		if !ok {
			return h.bodyStart
		}
		if !fn(RawField{Name: f.name, Value: f.value, Start: f.start, End: f.end}) {
			return h.bodyStart
		}
	}
}

// HeaderEnd returns the offset of raw's body: after the empty line that
// ends the header, or len(raw) when there is none (a header-only message).
func HeaderEnd(raw []byte) int {
	return ScanFields(raw, func(RawField) bool { return true })
}

// CountFields returns the number of header fields of raw, counting no
// further than max+1 (enough to tell that a limit is passed).
func CountFields(raw []byte, max int) int {
	n := 0
	ScanFields(raw, func(RawField) bool {
		n++
		return n <= max
	})
	return n
}

// HasField reports whether raw's header has a field called name. It
// looks at line starts only and copies nothing, so asking about a field
// that most messages lack is cheap. It reads the header as ScanFields
// does: a line that starts with the name, optional white space and a
// colon, before the first empty line, is such a field.
func HasField(raw []byte, name string) bool {
	for pos := 0; pos < len(raw); {
		end := len(raw)
		if i := bytes.IndexByte(raw[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		line := raw[pos:end]
		if line[0] == '\n' || (line[0] == '\r' && (len(line) == 1 || line[1] == '\n')) {
			return false // the empty line that ends the header
		}
		if len(line) > len(name) && equalFoldASCII(line[:len(name)], name) {
			if rest := bytes.TrimLeft(line[len(name):], " \t"); len(rest) > 0 && rest[0] == ':' {
				return true
			}
		}
		pos = end
	}
	return false
}

// RemoveFields returns raw without the header fields for which drop is
// true; raw itself when none is dropped.
func RemoveFields(raw []byte, drop func(RawField) bool) []byte {
	var out []byte
	last := 0
	ScanFields(raw, func(f RawField) bool {
		if drop(f) {
			if out == nil {
				out = make([]byte, 0, len(raw))
			}
			out = append(out, raw[last:f.Start]...)
			last = f.End
		}
		return true
	})
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// equalFoldASCII compares b with s, ASCII letters in any case.
func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, d := b[i], s[i]
		if c == d {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}
