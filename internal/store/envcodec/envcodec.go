// Package envcodec is the compact form of a message's envelope (RFC 9051
// §7.5.2) that the stores keep per message, so that FETCH ENVELOPE of a
// whole mailbox decodes neither JSON nor the MIME tree.
package envcodec

import (
	"encoding/binary"
	"errors"
	"slices"
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

// DecodeShared decodes Encode's output without copying
// it: every string of the result is a view of data, which the caller must
// never change afterwards, and the address lists come from addrs.
func DecodeShared(data []byte, addrs *Arena) (message.Envelope, error) {
	var e message.Envelope
	if len(data) == 0 || data[0] != version {
		return e, ErrMalformed
	}
	i := 1
	bad := false
	num := func() int {
		if i < len(data) && data[i] < 0x80 { // the common one-byte varint
			i++
			return int(data[i-1])
		}
		v, n := binary.Uvarint(data[i:])
		if n <= 0 || v > uint64(len(data)) {
			bad = true
			return 0
		}
		i += n
		return int(v)
	}
	str := func() string {
		l := num()
		if bad || l > len(data)-i {
			bad = true
			return ""
		}
		if l == 0 {
			return ""
		}
		v := unsafe.String(&data[i], l)
		i += l
		return v
	}
	e.Date = str()
	e.Subject = str()
	e.InReplyTo = str()
	e.MessageID = str()
	var lists [6][]message.Address
	for li := range lists {
		c := num()
		if bad || c > len(data)-i { // each address takes at least 5 bytes
			return message.Envelope{}, ErrMalformed
		}
		if c == 0 {
			continue
		}
		l := addrs.take(c)
		for j := range l {
			if i >= len(data) {
				return message.Envelope{}, ErrMalformed
			}
			a := &l[j]
			a.End = data[i]&1 != 0
			route := data[i]&2 != 0
			i++
			a.Name, a.Mailbox, a.Host, a.Group = str(), str(), str(), str()
			a.Route = "" // the slot may be reused: no route left from an earlier message
			if route {
				a.Route = str()
			}
		}
		lists[li] = l
	}
	if bad {
		return message.Envelope{}, ErrMalformed
	}
	e.From, e.Sender, e.ReplyTo, e.To, e.Cc, e.Bcc = lists[0], lists[1], lists[2], lists[3], lists[4], lists[5]
	return e, nil
}
