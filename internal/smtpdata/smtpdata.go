// Package smtpdata reads the message data of an SMTP transaction, for the
// MX (smtpd) and submission alike: within a size limit and a timeout per
// block, refusing the bare CR and LF that SMTP smuggling relies on.
package smtpdata

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Errors of Read.
var (
	ErrTooBig         = errors.New("message exceeds the size limit")
	ErrBareLineEnding = errors.New("bare CR or LF in message data")
)

// dataBlock is how much message data is read per deadline: each block of
// data must arrive within DataTimeout (RFC 5321 §4.5.3.2.5).
const dataBlock = 4096

// lineEndingChecker finds CR and LF that are not part of a CRLF pair.
//
// RFC 5321 §2.3.8 allows CR and LF in message data only together as CRLF.
// Servers that disagree on where a bare LF or CR ends a line disagree on
// where "<CRLF>.<CRLF>" ends the message, which is how SMTP smuggling
// (2023) slips a second, forged message past the first server. go-smtp
// ends DATA only at <CRLF>.<CRLF> but passes bare CR and LF through, so
// they are refused here: <LF>.<LF>, <LF>.<CR><LF>, <CR>.<CR>, <CR><CR><LF>
// and every other bare form.
type lineEndingChecker struct {
	crs, lfs int64 // CRs and LFs seen
	lastCR   bool  // the last byte seen was CR
	bad      bool
}

// check scans p, continuing from the previous call. Every LF must come
// right after a CR; each then has a CR of its own, so the CRs beyond the
// LFs are bare, but for one that ends p (its LF may start the next piece).
// Counting and searching single bytes (SIMD in package bytes) is several
// times faster than looking at each byte here.
func (c *lineEndingChecker) check(p []byte) {
	if c.bad || len(p) == 0 {
		return
	}
	for off := 0; ; {
		i := bytes.IndexByte(p[off:], '\n')
		if i < 0 {
			break
		}
		at := off + i
		if at == 0 && !c.lastCR || at > 0 && p[at-1] != '\r' {
			c.bad = true // an LF not after CR
			return
		}
		c.lfs++
		off = at + 1
	}
	c.crs += int64(bytes.Count(p, []byte{'\r'}))
	c.lastCR = p[len(p)-1] == '\r'
	pending := int64(0)
	if c.lastCR {
		pending = 1
	}
	if c.crs-c.lfs > pending {
		c.bad = true // a CR not before LF
	}
}

// finish reports whether the data ended cleanly (no CR left dangling).
func (c *lineEndingChecker) finish() bool {
	if c.lastCR {
		c.bad = true
	}
	return !c.bad
}

// Read appends the message data from r (go-smtp's DATA or BDAT reader)
// to dst. Before each block it extends the connection's read deadline by
// timeout (conn may be nil). It refuses data beyond limit bytes
// (ErrTooBig) and data with bare CR or LF (ErrBareLineEnding); after a
// bare line ending it keeps reading to the end of the message without
// storing it, so the refusal comes as the reply to the whole message and
// the session stays in step with the client.
func Read(dst *bytes.Buffer, r io.Reader, conn net.Conn, timeout time.Duration, limit int64) error {
	var (
		chk   lineEndingChecker
		total int64
	)
	// Each iteration consumes input or ends; the size limit (enforced by
	// go-smtp for DATA and BDAT, and again here) bounds the count. Data
	// is read straight into dst's free space and kept by the Write that
	// follows (bytes.Buffer.AvailableBuffer), so it is copied only once.
	for {
		if conn != nil {
			if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
				return fmt.Errorf("set data deadline: %w", err)
			}
		}
		dst.Grow(dataBlock)
		block := dst.AvailableBuffer()[:dataBlock]
		n, err := r.Read(block)
		total += int64(n)
		if total > limit {
			return ErrTooBig
		}
		if n > 0 {
			chk.check(block[:n])
			if !chk.bad {
				dst.Write(block[:n])
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read message data: %w", err)
		}
	}
	if !chk.finish() {
		return ErrBareLineEnding
	}
	return nil
}
