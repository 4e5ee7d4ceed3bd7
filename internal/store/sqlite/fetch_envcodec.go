package sqlite

import (
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	sqlite "modernc.org/sqlite"

	"pimail/internal/message"
)

// The compact envelope: what FETCH ENVELOPE (RFC 9051 §7.5.2) needs of a
// message, kept in blob_fetch.envelope (schema version 5) so that listing
// a mailbox decodes neither JSON nor the MIME tree. Layout: a version byte
// (1); the strings Date, Subject, In-Reply-To, Message-ID; then the six
// address lists From, Sender, Reply-To, To, Cc, Bcc, each a count and per
// address a flag byte (1: group end marker, 2: a route follows) and the
// strings Name, Mailbox, Host, Group, and Route when flagged. A string is
// its length (uvarint) and its bytes.

const envCodecVersion = 1

// encodeEnvelope returns the compact form of e.
func encodeEnvelope(e *message.Envelope) []byte {
	n := 16 + len(e.Date) + len(e.Subject) + len(e.InReplyTo) + len(e.MessageID)
	lists := [6][]message.Address{e.From, e.Sender, e.ReplyTo, e.To, e.Cc, e.Bcc}
	for _, l := range lists {
		for _, a := range l {
			n += 9 + len(a.Name) + len(a.Mailbox) + len(a.Host) + len(a.Group) + len(a.Route)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, envCodecVersion)
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

var errEnvCodec = errors.New("malformed compact envelope")

// decodeCompactEnvelope decodes encodeEnvelope's output. The strings
// share one allocation (a copy of data), and the addresses one slice.
func decodeCompactEnvelope(data []byte) (message.Envelope, error) {
	var addrs addrArena
	return decodeEnvelopeShared(slices.Clone(data), &addrs)
}

// addrArena hands out the address slices of many envelopes from shared
// blocks.
type addrArena struct{ block []message.Address }

func (a *addrArena) take(n int) []message.Address {
	if cap(a.block)-len(a.block) < n {
		a.block = make([]message.Address, 0, max(n, 512))
	}
	k := len(a.block)
	a.block = a.block[:k+n]
	return a.block[k : k+n : k+n]
}

// decodeEnvelopeShared decodes encodeEnvelope's output without copying
// it: every string of the result is a view of data, which the caller must
// never change afterwards, and the address lists come from addrs.
func decodeEnvelopeShared(data []byte, addrs *addrArena) (message.Envelope, error) {
	var e message.Envelope
	if len(data) == 0 || data[0] != envCodecVersion {
		return e, errEnvCodec
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
			return message.Envelope{}, errEnvCodec
		}
		if c == 0 {
			continue
		}
		l := addrs.take(c)
		for j := range l {
			if i >= len(data) {
				return message.Envelope{}, errEnvCodec
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
		return message.Envelope{}, errEnvCodec
	}
	e.From, e.Sender, e.ReplyTo, e.To, e.Cc, e.Bcc = lists[0], lists[1], lists[2], lists[3], lists[4], lists[5]
	return e, nil
}

func init() {
	// Functions for schema migration 5 (schema.go), which fills
	// blob_fetch and blob_addrs from the stored parse of existing blobs.
	//
	// pimail_envelope(parsed): the compact envelope of a stored
	// message.Parsed (JSON), NULL if it cannot be decoded (the migration
	// then leaves the blob without a blob_fetch row: FETCH reads its
	// stored parse as before, rather than the upgrade failing).
	sqlite.MustRegisterDeterministicScalarFunction("pimail_envelope", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			env, err := decodeEnvelope(sqlBytes(args[0]))
			if err != nil {
				return nil, nil
			}
			return encodeEnvelope(&env), nil
		})
	// pimail_header_size(parsed): the header size of a stored parse, -1
	// when it has no body, NULL if it cannot be decoded.
	sqlite.MustRegisterDeterministicScalarFunction("pimail_header_size", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			n, err := decodeBodyStart(sqlBytes(args[0]))
			if err != nil {
				return nil, nil
			}
			return n, nil
		})
	// pimail_lower(text): strings.ToLower, the folding of
	// store.ContainsFold, for the search columns of blob_addrs.
	sqlite.MustRegisterDeterministicScalarFunction("pimail_lower", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			return strings.ToLower(sqlText(args[0])), nil
		})
}

func sqlBytes(v driver.Value) []byte {
	switch x := v.(type) {
	case string:
		return []byte(x)
	case []byte:
		return x
	}
	return nil
}
