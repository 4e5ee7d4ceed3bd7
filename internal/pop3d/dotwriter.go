package pop3d

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

var crlf = []byte("\r\n")

// allLines asks writeMessage for the whole message (RETR).
const allLines = -1

// writeMessage sends a message as the body of a multi-line response
// (RFC 1939 §3): every line ends in CRLF (stored bare-LF lines are
// converted), a line that starts with "." gets one more "." in front
// (byte-stuffing), a missing final line ending is added, and the
// terminating ".\r\n" follows.
//
// With bodyLines >= 0 only the header, the blank line after it and that
// many lines of the body are sent (TOP, RFC 1939 §7).
func writeMessage(w *bufio.Writer, r io.Reader, bodyLines int) error {
	mw := &msgWriter{w: w, limit: bodyLines, lineStart: true, inHeader: true}
	br := bufio.NewReaderSize(r, 32*1024)
	for !mw.done {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			mw.chunk(chunk)
		}
		if err == nil || errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		return fmt.Errorf("reading message: %w", err)
	}
	mw.finish()
	mw.write([]byte(".\r\n"))
	if mw.err != nil {
		return fmt.Errorf("writing message: %w", mw.err)
	}
	return nil
}

// msgWriter converts a stored message into its POP3 transmission form one
// chunk at a time; a chunk is at most one line and ends at an LF when the
// line is complete.
type msgWriter struct {
	w         *bufio.Writer
	limit     int  // body lines to send; allLines for all
	lineStart bool // nothing of the current line written yet
	pendingCR bool // a CR ended the previous chunk of an unfinished line
	inHeader  bool
	body      int  // complete body lines written
	done      bool // enough written (TOP) or the client is gone
	err       error
}

// write sends b, remembering the first error: after it the message is
// not read further.
func (m *msgWriter) write(b []byte) {
	if m.err != nil {
		return
	}
	if _, err := m.w.Write(b); err != nil {
		m.err = err
		m.done = true
	}
}

func (m *msgWriter) chunk(c []byte) {
	complete := c[len(c)-1] == '\n'
	if complete {
		c = c[:len(c)-1]
		if n := len(c); n > 0 && c[n-1] == '\r' {
			c = c[:n-1]
		} else if n == 0 && m.pendingCR {
			// The CR that ended the previous chunk belongs to this CRLF.
			m.pendingCR = false
		}
	}
	if m.pendingCR {
		m.content([]byte{'\r'})
		m.pendingCR = false
	}
	if !complete && len(c) > 0 && c[len(c)-1] == '\r' {
		// Keep a trailing CR back: the next chunk may start with its LF.
		c = c[:len(c)-1]
		m.pendingCR = true
	}
	if len(c) > 0 {
		m.content(c)
	}
	if complete {
		m.endLine()
	}
}

// content writes part of a line, byte-stuffing a leading ".".
func (m *msgWriter) content(b []byte) {
	if m.lineStart {
		m.lineStart = false
		if b[0] == '.' {
			m.write([]byte{'.'})
		}
	}
	m.write(b)
}

// endLine finishes the current line with CRLF and counts it for TOP.
func (m *msgWriter) endLine() {
	empty := m.lineStart
	m.write(crlf)
	m.lineStart = true
	switch {
	case m.inHeader:
		if empty {
			// The blank line between header and body (RFC 5322 §2.1).
			m.inHeader = false
			m.done = m.limit == 0
		}
	case m.limit >= 0:
		m.body++
		m.done = m.body >= m.limit
	}
}

// finish completes an unterminated last line.
func (m *msgWriter) finish() {
	if m.pendingCR {
		m.content([]byte{'\r'})
		m.pendingCR = false
	}
	if !m.lineStart {
		m.write(crlf)
		m.lineStart = true
	}
}
