package pop3d

import (
	"bufio"
	"errors"
	"io"
)

// errLineTooLong reports a command line over the limit. The line has been
// consumed (discarded) and the session can go on.
var errLineTooLong = errors.New("command line too long")

// lineReader reads CRLF-terminated lines (a bare LF is accepted too) of
// bounded length. A longer line is discarded piecewise in the buffer,
// never accumulated, so memory stays at the buffer size whatever a client
// sends.
type lineReader struct {
	br  *bufio.Reader
	max int
}

func newLineReader(r io.Reader, maxLine int) *lineReader {
	// The buffer holds the longest allowed line plus its CRLF.
	return &lineReader{br: bufio.NewReaderSize(r, maxLine+2), max: maxLine}
}

// reset makes the reader read from r, dropping anything buffered (STLS:
// RFC 2595 §4 and RFC 3207's reasoning against pipelined plaintext).
func (lr *lineReader) reset(r io.Reader) { lr.br.Reset(r) }

// buffered reports whether input is waiting, so that responses to
// pipelined commands can be flushed together (RFC 2449 §6.6).
func (lr *lineReader) buffered() int { return lr.br.Buffered() }

// readLine returns the next line without its line ending.
func (lr *lineReader) readLine() (string, error) {
	b, err := lr.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", lr.discard()
	}
	if err != nil {
		if len(b) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	b = b[:len(b)-1]
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	if len(b) > lr.max {
		return "", errLineTooLong
	}
	return string(b), nil
}

// discard skips the rest of an overlong line.
func (lr *lineReader) discard() error {
	for {
		_, err := lr.br.ReadSlice('\n')
		switch {
		case err == nil:
			return errLineTooLong
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return err
		}
	}
}
