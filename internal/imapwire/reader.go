// Package imapwire is the IMAP wire grammar (RFC 9051 §9, RFC 3501 §9),
// apart from any session state so that it can be fuzzed: a command reader
// with hard limits on line length and literal sizes, parsers for the
// structured arguments (sequence sets, fetch attributes, search keys, dates,
// modified UTF-7 mailbox names) and a response writer.
package imapwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Default limits used when Limits fields are zero.
const (
	DefaultMaxLine       = 64 * 1024
	DefaultMaxLiteral    = 50 * 1024 * 1024
	DefaultMaxListDepth  = 32
	DefaultMaxArgs       = 100000
	maxLiteralDigits     = 19
	defaultDiscardFactor = 2
)

// Limits bound what one command may cost. All zero values mean the defaults.
type Limits struct {
	MaxLine int // bytes of one line, without the literals (longer → BAD)
	// MaxLiteral is the largest literal accepted (APPENDLIMIT). A larger
	// synchronising literal is refused before the "+" continuation.
	MaxLiteral int64
	// MaxCommandLiterals caps the sum of all literals of one command.
	MaxCommandLiterals int64
	// MaxDiscard caps how many bytes of refused non-synchronising literals
	// (LITERAL+, RFC 7888) are read and thrown away so the session can go on;
	// beyond it the error is fatal.
	MaxDiscard int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultMaxLine
	}
	if l.MaxLiteral <= 0 {
		l.MaxLiteral = DefaultMaxLiteral
	}
	if l.MaxCommandLiterals <= 0 {
		l.MaxCommandLiterals = l.MaxLiteral + 1024*1024
	}
	if l.MaxDiscard <= 0 {
		l.MaxDiscard = l.MaxLiteral * defaultDiscardFactor
	}
	return l
}

// Error is a problem with one command. Tag is the command's tag when it
// could be read ("*" otherwise). Code is a response code such as "TOOBIG".
// Fatal errors leave the stream in an unknown state: the session must end.
// No (rather than BAD) is set for well-formed commands refused for a limit.
type Error struct {
	Tag   string
	Code  string
	Msg   string
	No    bool
	Fatal bool
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("[%s] %s", e.Code, e.Msg)
	}
	return e.Msg
}

// ErrLineTooLong is the Msg of the error for an over-long line.
const ErrLineTooLong = "line too long"

// ContinueFunc is called before the data of a synchronising literal is read
// (RFC 9051 §4.3, §7.5): it must send "+ ..." and flush. size is the
// announced literal size.
type ContinueFunc func(size int64) error

// Reader reads IMAP commands from a client.
type Reader struct {
	br     *bufio.Reader
	limits Limits
	cont   ContinueFunc
}

// NewReader returns a reader with the given limits; cont sends continuation
// requests for synchronising literals.
func NewReader(br *bufio.Reader, limits Limits, cont ContinueFunc) *Reader {
	return &Reader{br: br, limits: limits.withDefaults(), cont: cont}
}

// SetLimits changes the limits, e.g. after authentication.
func (r *Reader) SetLimits(l Limits) { r.limits = l.withDefaults() }

// Limits returns the limits in force.
func (r *Reader) Limits() Limits { return r.limits }

// SetReader replaces the underlying reader (after STARTTLS).
func (r *Reader) SetReader(br *bufio.Reader) { r.br = br }

// BufReader returns the underlying reader, e.g. to stack a decompressor
// on it (COMPRESS, RFC 4978): the bytes it has read ahead are not lost.
func (r *Reader) BufReader() *bufio.Reader { return r.br }

// Buffered reports how many bytes are read ahead but not consumed; after
// STARTTLS any buffered plaintext is a command-injection attempt.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// errTooLong is returned by readLine for over-long lines; the line has been
// consumed, and prefix holds its first bytes.
var errTooLong = errors.New(ErrLineTooLong)

// readLine reads one line up to LF and returns it without CRLF (a bare LF
// is accepted as well). A line over the limit is read to its end and
// discarded without being buffered; the first MaxLine bytes are returned
// with errTooLong so that the tag can still be answered.
func (r *Reader) readLine() ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > r.limits.MaxLine+2 {
				room := r.limits.MaxLine - len(line)
				if room > 0 && room <= len(chunk) {
					line = append(line, chunk[:room]...)
				}
				tooLong = true
			} else {
				line = append(line, chunk...)
			}
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF && len(line) > 0 && !tooLong {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if tooLong {
		return line, errTooLong
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// ReadLine reads one raw line (IDLE's DONE, an AUTHENTICATE response)
// under the line limit.
func (r *Reader) ReadLine() (string, error) {
	line, err := r.readLine()
	if err == errTooLong {
		return "", &Error{Tag: "*", Msg: ErrLineTooLong}
	}
	if err != nil {
		return "", err
	}
	return string(line), nil
}

// Command is one complete client command.
type Command struct {
	Tag  string
	Name string // upper case
	Args []Arg
}

// ReadCommand reads one complete command, literals included. Errors of type
// *Error describe a bad command (answer it and go on unless Fatal); other
// errors come from the connection.
func (r *Reader) ReadCommand() (*Command, error) {
	line, err := r.readLine()
	if err == errTooLong {
		return nil, &Error{Tag: tagOf(line), Msg: ErrLineTooLong}
	}
	if err != nil {
		return nil, err
	}
	p := &parser{r: r, line: line}
	cmd, perr := p.command()
	if perr != nil {
		e := perr
		if e.Tag == "" {
			e.Tag = tagOf(line)
		}
		if !e.Fatal && !p.consumedAll {
			if ferr := p.skipRest(); ferr != nil {
				return nil, ferr
			}
		}
		return nil, e
	}
	return cmd, nil
}

// tagOf extracts a plausible tag from the start of a (possibly broken) line.
func tagOf(line []byte) string {
	end := 0
	for end < len(line) && end < 64 && isTagChar(line[end]) {
		end++
	}
	if end == 0 || end >= len(line) || line[end] != ' ' {
		return "*"
	}
	return string(line[:end])
}

// isAtomChar reports whether c may appear in an atom (RFC 9051 §9 ATOM-CHAR,
// leniently including list-wildcards, resp-specials and 8-bit bytes, which
// command-specific parsers then judge).
func isAtomChar(c byte) bool {
	if c <= 0x20 || c == 0x7f {
		return false
	}
	switch c {
	case '(', ')', '{', '"':
		return false
	}
	return true
}

// isTagChar: tag = 1*<any ASTRING-CHAR except "+"> (RFC 9051 §9).
func isTagChar(c byte) bool {
	return isAtomChar(c) && c != '+' && c != '%' && c != '*' && c != '[' && c != '\\' && c < 0x80
}

// upper is strings.ToUpper for ASCII.
func upper(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'a' && c <= 'z' || c >= 0x80 {
			return strings.ToUpper(s)
		}
	}
	return s
}
