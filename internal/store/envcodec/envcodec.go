// Package envcodec is the compact form of a message's envelope (RFC 9051
// §7.5.2) that the stores keep per message, so that FETCH ENVELOPE of a
// whole mailbox decodes neither JSON nor the MIME tree.
package envcodec

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"pimail/internal/message"
)

// Layout: a version byte
// (1); the strings Date, Subject, In-Reply-To, Message-ID; then the six
// address lists From, Sender, Reply-To, To, Cc, Bcc, each a count and per
// address a flag byte (1: group end marker, 2: a route follows) and the
// strings Name, Mailbox, Host, Group, and Route when flagged. A string is
// its length (uvarint) and its bytes.

const version = 1

// Encode returns the compact form of e.
func Encode(e *message.Envelope) []byte {
	n := 16 + len(e.Date) + len(e.Subject) + len(e.InReplyTo) + len(e.MessageID)
	lists := [6][]message.Address{e.From, e.Sender, e.ReplyTo, e.To, e.Cc, e.Bcc}
	for _, l := range lists {
		for _, a := range l {
			n += 9 + len(a.Name) + len(a.Mailbox) + len(a.Host) + len(a.Group) + len(a.Route)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, version)
	str := func(s string) {
		s = validUTF8(s)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(e.Date)
	str(e.Subject)
	str(e.InReplyTo)
	str(e.MessageID)
	for _, l := range lists {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, a := range l {
			var f byte
			if a.End {
				f = 1
			}
			if a.Route != "" {
				f |= 2
			}
			b = append(b, f)
			str(a.Name)
			str(a.Mailbox)
			str(a.Host)
			str(a.Group)
			if a.Route != "" {
				str(a.Route)
			}
		}
	}
	return b
}

// validUTF8 replaces every invalid byte of s with U+FFFD, as
// encoding/json does when it writes the stored parse, so that the compact
// envelope says what Fetch with Parsed says.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for _, r := range s {
		b = utf8.AppendRune(b, r) // an invalid byte ranges as RuneError
	}
	return string(b)
}

var ErrMalformed = errors.New("malformed compact envelope")

// Decode decodes Encode's output. The strings
// share one allocation (a copy of data), and the addresses one slice.
func Decode(data []byte) (message.Envelope, error) {
	var addrs Arena
	return DecodeShared(slices.Clone(data), &addrs)
}

// Arena hands out the address slices of many envelopes from shared
// blocks.
type Arena struct{ block []message.Address }

// NewArena returns an arena that starts with the space of buf (a buffer
// used before, whose addresses nothing refers to any more).
func NewArena(buf []message.Address) Arena { return Arena{block: buf[:0]} }

func (a *Arena) take(n int) []message.Address {
	if cap(a.block)-len(a.block) < n {
		a.block = make([]message.Address, 0, max(n, 512))
	}
	k := len(a.block)
	a.block = a.block[:k+n]
	return a.block[k : k+n : k+n]
}

// reader reads the strings and counts of Encode's output; bad is set at
// the first one that does not fit.
type reader struct {
	data []byte
	i    int
	bad  bool
}

func (r *reader) num() int {
	if r.i < len(r.data) && r.data[r.i] < 0x80 { // the common one-byte varint
		r.i++
		return int(r.data[r.i-1])
	}
	v, n := binary.Uvarint(r.data[r.i:])
	if n <= 0 || v > uint64(len(r.data)) {
		r.bad = true
		return 0
	}
	r.i += n
	return int(v)
}

// str returns a view of the next string.
func (r *reader) str() string {
	l := r.num()
	if r.bad || l > len(r.data)-r.i {
		r.bad = true
		return ""
	}
	if l == 0 {
		return ""
	}
	v := unsafe.String(&r.data[r.i], l)
	r.i += l
	return v
}

func newReader(data []byte) (reader, error) {
	if len(data) == 0 || data[0] != version {
		return reader{}, ErrMalformed
	}
	return reader{data: data, i: 1}, nil
}

// IDs returns the In-Reply-To and Message-ID fields of Encode's output
// (copies), without decoding the rest.
func IDs(data []byte) (inReplyTo, messageID string, err error) {
	r, err := newReader(data)
	if err != nil {
		return "", "", err
	}
	r.str() // Date
	r.str() // Subject
	inReplyTo, messageID = strings.Clone(r.str()), strings.Clone(r.str())
	if r.bad {
		return "", "", ErrMalformed
	}
	return inReplyTo, messageID, nil
}

// DecodeShared decodes Encode's output without copying
// it: every string of the result is a view of data, which the caller must
// never change afterwards, and the address lists come from addrs.
func DecodeShared(data []byte, addrs *Arena) (message.Envelope, error) {
	var e message.Envelope
	r, err := newReader(data)
	if err != nil {
		return e, err
	}
	e.Date = r.str()
	e.Subject = r.str()
	e.InReplyTo = r.str()
	e.MessageID = r.str()
	var lists [6][]message.Address
	for li := range lists {
		c := r.num()
		if r.bad || c > len(data)-r.i { // each address takes at least 5 bytes
			return message.Envelope{}, ErrMalformed
		}
		if c == 0 {
			continue
		}
		l := addrs.take(c)
		for j := range l {
			if r.i >= len(data) {
				return message.Envelope{}, ErrMalformed
			}
			a := &l[j]
			a.End = data[r.i]&1 != 0
			route := data[r.i]&2 != 0
			r.i++
			a.Name, a.Mailbox, a.Host, a.Group = r.str(), r.str(), r.str(), r.str()
			a.Route = "" // the slot may be reused: no route left from an earlier message
			if route {
				a.Route = r.str()
			}
		}
		lists[li] = l
	}
	if r.bad {
		return message.Envelope{}, ErrMalformed
	}
	e.From, e.Sender, e.ReplyTo, e.To, e.Cc, e.Bcc = lists[0], lists[1], lists[2], lists[3], lists[4], lists[5]
	return e, nil
}
