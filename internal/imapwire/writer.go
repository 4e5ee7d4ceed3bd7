package imapwire

import (
	"bufio"
	"slices"
	"strconv"
	"sync"
)

// Writer writes server responses (RFC 9051 §7). It remembers the first
// write error; Flush returns it.
type Writer struct {
	bw    *bufio.Writer
	inner *bufio.Writer // while Grow is in effect: the writer bw writes to
	err   error
	// UTF8 allows 8-bit UTF-8 in quoted strings (IMAP4rev2, UTF8=ACCEPT:
	// RFC 9051 §4.3, RFC 6855 §3). Otherwise 8-bit text is sent as a literal.
	UTF8 bool
}

// NewWriter returns a response writer on bw.
func NewWriter(bw *bufio.Writer) *Writer { return &Writer{bw: bw} }

// SetWriter replaces the underlying writer (after STARTTLS).
func (w *Writer) SetWriter(bw *bufio.Writer) { w.bw = bw }

func (w *Writer) setErr(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

// Raw writes s as is.
func (w *Writer) Raw(s string) *Writer {
	if w.err == nil {
		_, err := w.bw.WriteString(s)
		w.setErr(err)
	}
	return w
}

// Bytes writes b as is.
func (w *Writer) Bytes(b []byte) *Writer {
	if w.err == nil {
		_, err := w.bw.Write(b)
		w.setErr(err)
	}
	return w
}

// Byte writes one byte.
func (w *Writer) Byte(c byte) *Writer {
	if w.err == nil {
		w.setErr(w.bw.WriteByte(c))
	}
	return w
}

// SP writes a space.
func (w *Writer) SP() *Writer { return w.Byte(' ') }

// Number writes a decimal number.
func (w *Writer) Number(n uint64) *Writer {
	var buf [20]byte
	return w.Bytes(strconv.AppendUint(buf[:0], n, 10))
}

// Int writes a non-negative decimal number.
func (w *Writer) Int(n int64) *Writer {
	if n < 0 {
		n = 0
	}
	return w.Number(uint64(n))
}

// CRLF ends a response line.
func (w *Writer) CRLF() *Writer { return w.Raw("\r\n") }

// NIL writes the NIL atom.
func (w *Writer) NIL() *Writer { return w.Raw("NIL") }

// Byte classes for quoted strings (RFC 9051 §4.3, §9 QUOTED-CHAR).
const (
	qPlain   = iota // may appear in a quoted string as is
	qLiteral        // CR, LF, NUL, and (our choice) '"' and '\\': literal
	q8bit           // 8-bit: quoted only with UTF8 (RFC 6855 §3)
)

var quoteClass = func() (t [256]uint8) {
	for _, c := range []byte{'\r', '\n', 0, '"', '\\'} {
		t[c] = qLiteral
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = q8bit
	}
	return t
}()

// needsLiteral reports whether s cannot be a quoted string: CR, LF, NUL,
// or, without UTF8, 8-bit bytes; quotes and backslashes are sent as
// literals too, and very long strings, so that no client has to unescape.
func (w *Writer) needsLiteral(s string) bool {
	if len(s) > 1024 {
		return true
	}
	// Most strings are plain: one load and test per byte until the
	// first byte that is not.
	for i := 0; i < len(s); i++ {
		if quoteClass[s[i]] != qPlain {
			return w.literalFrom(s[i:])
		}
	}
	return false
}

// literalFrom is needsLiteral from the first byte that is not plain on.
func (w *Writer) literalFrom(s string) bool {
	for i := 0; i < len(s); i++ {
		switch quoteClass[s[i]] {
		case qLiteral:
			return true
		case q8bit:
			if !w.UTF8 {
				return true
			}
		}
	}
	return false
}

// String writes s as a quoted string or, when its content needs it, as a
// literal (RFC 9051 §4.3).
func (w *Writer) String(s string) *Writer {
	if w.needsLiteral(s) {
		return w.Literal([]byte(s))
	}
	return w.Byte('"').Raw(s).Byte('"')
}

// AppendString appends s to b as a string (RFC 9051 §4.3): a literal
// when it holds CR, LF or NUL, or 8-bit bytes without UTF8, or is very
// long; otherwise a quoted string in which '"' and '\\' are escaped with a
// backslash (quoted-specials), which costs a client less than a literal:
// a third of the ENVELOPE responses of a mailing-list archive have a quote
// in their In-Reply-To.
func (w *Writer) AppendString(b []byte, s string) []byte {
	i := 0
	for i < len(s) && quoteClass[s[i]] == qPlain {
		i++
	}
	if i == len(s) && len(s) <= 1024 {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	escapes := 0
	literal := len(s) > 1024
	for _, c := range []byte(s[i:]) {
		switch {
		case c == '"' || c == '\\':
			escapes++
		case quoteClass[c] == qLiteral, quoteClass[c] == q8bit && !w.UTF8:
			literal = true
		}
	}
	if literal {
		b = append(b, '{')
		b = strconv.AppendUint(b, uint64(len(s)), 10)
		b = append(b, "}\r\n"...)
		return append(b, s...)
	}
	b = slices.Grow(b, len(s)+escapes+2)
	b = append(b, '"')
	b = append(b, s[:i]...)
	for _, c := range []byte(s[i:]) {
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return append(b, '"')
}

// AppendNString appends s as NString writes it.
func (w *Writer) AppendNString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "NIL"...)
	}
	return w.AppendString(b, s)
}

// AvailableBuffer returns an empty buffer whose capacity is the free
// space of the output buffer (bufio.Writer.AvailableBuffer): append a
// response to it and send it with Bytes, which then copies nothing.
func (w *Writer) AvailableBuffer() []byte { return w.bw.AvailableBuffer() }

// NString writes s, or NIL when s is empty.
func (w *Writer) NString(s string) *Writer {
	if s == "" {
		return w.NIL()
	}
	return w.String(s)
}

// AString writes s as an atom when it is one, else as a string.
func (w *Writer) AString(s string) *Writer {
	if s != "" && isPlainAtom(s) {
		return w.Raw(s)
	}
	return w.String(s)
}

func isPlainAtom(s string) bool {
	if upper(s) == "NIL" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAtomChar(c) || c >= 0x80 || c == '%' || c == '*' || c == '\\' || c == ']' || c == '[' {
			return false
		}
	}
	return true
}

// Literal writes b as a literal, "{n}" CRLF and the bytes.
func (w *Writer) Literal(b []byte) *Writer {
	w.Byte('{').Number(uint64(len(b))).Raw("}\r\n")
	return w.Bytes(b)
}

// LiteralHeader writes only "{n}" CRLF, for data written afterwards.
func (w *Writer) LiteralHeader(n int64) *Writer {
	return w.Byte('{').Int(n).Raw("}\r\n")
}

// Untagged writes "* " + text + CRLF.
func (w *Writer) Untagged(text string) *Writer { return w.Raw("* ").Raw(text).CRLF() }

// Tagged writes a complete tagged status response, "tag OK [code] text".
func (w *Writer) Tagged(tag, status, code, text string) *Writer {
	w.Raw(tag).SP().Raw(status).SP()
	if code != "" {
		w.Byte('[').Raw(code).Raw("] ")
	}
	return w.Raw(text).CRLF()
}

// Continue writes a continuation request "+ text".
func (w *Writer) Continue(text string) *Writer { return w.Raw("+ ").Raw(text).CRLF() }

// Flush sends what is buffered and returns the first error.
func (w *Writer) Flush() error {
	if w.err == nil {
		w.setErr(w.bw.Flush())
	}
	if w.err == nil && w.inner != nil {
		w.setErr(w.inner.Flush())
	}
	return w.err
}

// bigBuffers are Grow's buffers, reused.
var bigBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bigBuffer) }}

// bigBuffer is the size of Grow's buffer: a long response (a FETCH of a
// whole mailbox) then goes out in writes of this size, fewer system calls
// than the connection's own buffer makes.
const bigBuffer = 256 << 10

// Grow puts a larger buffer in front of the output until the returned
// function is called; Flush flushes both. The returned function writes
// what the larger buffer holds on to the connection's buffer, without
// flushing it.
func (w *Writer) Grow() (restore func()) {
	if w.inner != nil {
		return func() {}
	}
	big := bigBuffers.Get().(*bufio.Writer)
	big.Reset(w.bw)
	w.inner, w.bw = w.bw, big
	return func() {
		if w.err == nil {
			w.setErr(big.Flush())
		}
		w.bw, w.inner = w.inner, nil
		big.Reset(nil)
		bigBuffers.Put(big)
	}
}

// Err returns the first write error.
func (w *Writer) Err() error { return w.err }
