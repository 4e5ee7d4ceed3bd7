package delivery

import "bytes"

// Message is a received message with free room in front of it: the
// pipeline prepends its trace and verdict fields there and removes
// foreign verdict fields by moving the header, so that the message itself
// is never copied. That is what keeps a 50 MB message that the SMTP
// server spooled to a file (and mapped into memory) from becoming 50 MB of
// heap, and it saves a copy of every small one.
//
// The pipeline changes the bytes of buf (in the room and in the header),
// and nothing keeps buf after DeliverMessage returns.
type Message struct {
	buf []byte
	off int // the message is buf[off:]
}

// NewMessage wraps buf, whose first room bytes are free and whose rest is
// the message.
func NewMessage(buf []byte, room int) *Message {
	return &Message{buf: buf, off: room}
}

// copyMessage returns a Message holding a copy of raw with room bytes free
// in front: for callers whose bytes must stay as they are.
func copyMessage(raw []byte, room int) *Message {
	buf := make([]byte, room+len(raw))
	copy(buf[room:], raw)
	return &Message{buf: buf, off: room}
}

// Bytes is the message as it is now.
func (m *Message) Bytes() []byte { return m.buf[m.off:] }

// Prepend puts s in front of the message, in the room when it fits and
// else in a new buffer (a copy, which the room exists to avoid).
func (m *Message) Prepend(s string) {
	if len(s) > m.off {
		grown := make([]byte, len(s)+defaultRoom+len(m.buf)-m.off)
		copy(grown[len(s)+defaultRoom:], m.buf[m.off:])
		m.buf, m.off = grown, len(s)+defaultRoom
	}
	m.off -= len(s)
	copy(m.buf[m.off:], s)
}

// replaceHeader replaces the first n bytes of the message with h, which is
// not longer: h is moved right up to the rest, and the message starts
// later.
func (m *Message) replaceHeader(n int, h []byte) {
	end := m.off + n
	m.off = end - len(h)
	copy(m.buf[m.off:end], h)
}

// insertAfterFirstLine puts fields right after the first line of the
// message (the Return-Path field) by moving that line back into the room.
func (m *Message) insertAfterFirstLine(fields string) {
	raw := m.Bytes()
	at := bytes.IndexByte(raw, '\n') + 1
	first := raw[:at]
	if len(fields) > m.off {
		m.Prepend(fields) // makes room; the first line is moved below
		raw = m.Bytes()
		copy(raw, raw[len(fields):len(fields)+at])
		copy(raw[at:], fields)
		return
	}
	m.off -= len(fields)
	copy(m.buf[m.off:], first)
	copy(m.buf[m.off+at:], fields)
}

// defaultRoom is the room left in front of a message for the fields the
// pipeline adds: Return-Path, Authentication-Results and the filters'
// verdicts (a few hundred bytes; more only costs a copy).
const defaultRoom = 2 << 10

// headerLen returns the length of the message header, its empty line
// included, or len(raw) when there is no empty line.
func headerLen(raw []byte) int {
	if bytes.HasPrefix(raw, []byte("\r\n")) {
		return 2
	}
	if bytes.HasPrefix(raw, []byte("\n")) {
		return 1
	}
	crlf := bytes.Index(raw, []byte("\r\n\r\n"))
	lf := bytes.Index(raw, []byte("\n\n"))
	switch {
	case crlf >= 0 && (lf < 0 || crlf < lf):
		return crlf + 4
	case lf >= 0:
		return lf + 2
	}
	return len(raw)
}
