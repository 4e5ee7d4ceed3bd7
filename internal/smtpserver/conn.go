package smtpserver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Buffer sizes. A session's read buffer holds command lines (and grows up
// to the line limit for a long one); message data is read through a
// larger block taken from a pool only while DATA or BDAT runs, so an idle
// session holds 4 KiB.
const (
	readBufSize   = 4 << 10
	dataBlockSize = 64 << 10
)

var (
	readBufs   = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}
	dataBlocks = sync.Pool{New: func() any { b := make([]byte, dataBlockSize); return &b }}
)

// errLineTooLong: a command line longer than the limit. The rest of it is
// not read, so the session cannot go on in step with the client.
var errLineTooLong = errors.New("line too long")

// conn is a session's connection: buffered reads of command lines and
// message data, and replies collected until the server would wait for the
// client (RFC 2920 §3: a server may answer a group of pipelined commands
// together, but must send what it has before it blocks reading).
type conn struct {
	nc                        net.Conn
	readTimeout, writeTimeout time.Duration
	rdl, wdl                  time.Time // the deadlines set on nc

	rbuf *[]byte
	buf  []byte // *rbuf, or a larger buffer for a long line
	r, w int    // unread input is buf[r:w]

	out []byte // replies not sent yet
	err error  // the first write error; the session ends
}

func newConn(nc net.Conn, readTimeout, writeTimeout time.Duration) *conn {
	rb := readBufs.Get().(*[]byte)
	return &conn{nc: nc, readTimeout: readTimeout, writeTimeout: writeTimeout, rbuf: rb, buf: *rb, out: make([]byte, 0, 512)}
}

// setReadDeadline sets the read deadline and remembers it.
func (c *conn) setReadDeadline(t time.Time) error {
	c.rdl = t
	return c.nc.SetReadDeadline(t)
}

// renew moves a deadline to now+timeout, unless more than half of the
// timeout is still left: a deadline set per command or reply is then
// between half and all of the timeout away, which bounds a slow client
// just as well and saves the timer update of most commands (a session
// refused at RCPT costs little more than its system calls).
func renew(dl *time.Time, timeout time.Duration, set func(time.Time) error) error {
	now := time.Now()
	if dl.Sub(now) > timeout/2 {
		return nil
	}
	*dl = now.Add(timeout)
	return set(*dl)
}

// release gives the read buffer back; the conn is not used again.
func (c *conn) release() {
	if c.rbuf != nil {
		readBufs.Put(c.rbuf)
		c.rbuf, c.buf = nil, nil
	}
}

// buffered returns how many bytes of input are waiting (pipelined
// commands).
func (c *conn) buffered() int { return c.w - c.r }

// readLine returns the next line without its line break: it ends at LF,
// and the CRs before the LF are dropped (as in message data, framing.go).
// The whole line must arrive within the read timeout (from the first wait
// for it; see renew), however it trickles in: a client cannot keep a
// session by sending a byte at a time (RFC 5321 §4.5.3.2.7's 5 minutes
// are for the command, not for each byte). Pending replies are sent before
// the server waits. The line is valid until the next read.
func (c *conn) readLine(maxLen int) ([]byte, error) {
	deadlineSet := false
	scanned := 0
	for {
		if i := bytes.IndexByte(c.buf[c.r+scanned:c.w], '\n'); i >= 0 {
			end := c.r + scanned + i
			line := c.buf[c.r:end]
			c.r = end + 1
			if len(line)+1 > maxLen {
				return nil, errLineTooLong
			}
			return bytes.TrimRight(line, "\r"), nil
		}
		scanned = c.w - c.r
		if scanned+1 > maxLen {
			return nil, errLineTooLong
		}
		if err := c.flush(); err != nil {
			return nil, err
		}
		c.makeRoom(maxLen)
		if !deadlineSet {
			if err := renew(&c.rdl, c.readTimeout, c.nc.SetReadDeadline); err != nil {
				return nil, err
			}
			deadlineSet = true
		}
		n, err := c.nc.Read(c.buf[c.w:])
		c.w += n
		if err != nil && n == 0 {
			return nil, err
		}
	}
}

// makeRoom makes space after the unread input: it moves the input to the
// front, and grows the buffer (up to max) when the input fills it.
func (c *conn) makeRoom(max int) {
	if c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	if c.w == len(c.buf) && len(c.buf) < max {
		grown := make([]byte, min(2*len(c.buf), max))
		copy(grown, c.buf[:c.w])
		c.buf = grown
	}
}

// take returns up to n bytes of buffered input, consumed.
func (c *conn) take(n int) []byte {
	n = min(n, c.w-c.r)
	p := c.buf[c.r : c.r+n]
	c.r += n
	return p
}

// unread puts p back in front of the buffered input: the bytes read with
// message data that belong to the commands after it.
func (c *conn) unread(p []byte) {
	if len(p) == 0 {
		return
	}
	rest := c.buf[c.r:c.w]
	need := len(p) + len(rest)
	if need > len(c.buf) {
		grown := make([]byte, need)
		copy(grown[len(p):], rest)
		c.buf = grown
	} else {
		copy(c.buf[len(p):], rest)
	}
	copy(c.buf, p)
	c.r, c.w = 0, need
}

// discardInput drops what the client sent ahead (after STARTTLS, RFC 3207
// §4.2: commands pipelined behind it must not run).
func (c *conn) discardInput() { c.r, c.w = 0, 0 }

// reply adds a reply (RFC 5321 §4.2) with its enhanced code (RFC 2034):
// "250 2.1.0 text".
func (c *conn) reply(r *reply) {
	c.out = r.appendTo(c.out, ' ')
}

// replyLines adds a multi-line reply: every line but the last with "-"
// after the code (RFC 5321 §4.2.1). Used for EHLO, without enhanced codes
// (RFC 2034 §3: not on EHLO's reply).
func (c *conn) replyLines(code int, lines []string) {
	for i, l := range lines {
		c.out = strconv.AppendInt(c.out, int64(code), 10)
		if i < len(lines)-1 {
			c.out = append(c.out, '-')
		} else {
			c.out = append(c.out, ' ')
		}
		c.out = append(c.out, l...)
		c.out = append(c.out, '\r', '\n')
	}
}

// raw adds text as it is (a greeting, a SASL challenge).
func (c *conn) raw(s string) { c.out = append(c.out, s...) }

// flush sends the pending replies within the write timeout.
func (c *conn) flush() error {
	if c.err != nil || len(c.out) == 0 {
		return c.err
	}
	if err := renew(&c.wdl, c.writeTimeout, c.nc.SetWriteDeadline); err != nil {
		c.err = err
		return err
	}
	_, err := c.nc.Write(c.out)
	c.out = c.out[:0]
	if err != nil {
		c.err = err
	}
	return err
}

// readData feeds the buffered input, then the connection's, to fr until
// the framer is done (DATA's end marker, or n bytes of BDAT when n >= 0)
// or stops at a long line. Each step that needs the network must bring at
// least dataProgress bytes within timeout, counted from the last time it
// did: a client that trickles less is cut off, as in readLine. After each
// piece, sink may move the framer's output away (to the spool file); its
// error ends the reading. Bytes read past the end go back to the input.
func (c *conn) readData(fr *framer, n int64, timeout time.Duration, sink func() error) error {
	feed := func(p []byte) []byte {
		q := p
		if n >= 0 && int64(len(q)) > n {
			q = q[:n]
		}
		used := fr.feed(q)
		if n >= 0 {
			n -= int64(used)
		}
		return p[used:]
	}
	finished := func() bool { return fr.done || fr.tooLong || n == 0 }
	if c.buffered() > 0 {
		if rest := feed(c.take(c.buffered())); len(rest) > 0 {
			c.unread(rest)
		}
		if err := sink(); err != nil || finished() {
			return err
		}
	}
	if err := c.flush(); err != nil {
		return err
	}
	block := dataBlocks.Get().(*[]byte)
	defer dataBlocks.Put(block)
	var progress int
	deadline := time.Now().Add(timeout)
	for !finished() {
		if !deadline.Equal(c.rdl) {
			if err := c.setReadDeadline(deadline); err != nil {
				return err
			}
		}
		size := len(*block)
		if n >= 0 {
			size = int(min(int64(size), n))
		}
		got, err := c.nc.Read((*block)[:size])
		if got > 0 {
			if progress += got; progress >= dataProgress {
				progress, deadline = 0, time.Now().Add(timeout)
			}
			if rest := feed((*block)[:got]); len(rest) > 0 {
				c.unread(rest)
			}
			if serr := sink(); serr != nil {
				return serr
			}
		}
		if err != nil && !finished() {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// dataProgress is how much message data must arrive per DataTimeout.
const dataProgress = 4 << 10
