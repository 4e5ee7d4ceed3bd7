package mailimport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"pimail/internal/message"
)

// MboxVariant says how "From " lines in message bodies are quoted.
type MboxVariant int

const (
	// MboxRD: every line matching ^>*From  was given one more '>'.
	MboxRD MboxVariant = iota
	// MboxO: only ^From  was quoted to >From ; ">From " in a body is
	// ambiguous and stays as it is.
	MboxO
)

// ParseMboxVariant parses "mboxrd" or "mboxo".
func ParseMboxVariant(s string) (MboxVariant, error) {
	switch strings.ToLower(s) {
	case "mboxrd", "rd", "":
		return MboxRD, nil
	case "mboxo", "o":
		return MboxO, nil
	}
	return 0, fmt.Errorf("unknown mbox variant %q (want mboxrd or mboxo)", s)
}

// ErrNotMbox is returned when a file does not start with a From_ line.
var ErrNotMbox = errors.New("not an mbox file: no From_ line at the start")

// errTooLarge marks a message longer than the reader's limit; Next returns
// it wrapped, and the next call continues with the following message.
var errTooLarge = errors.New("message too large")

// MboxReader reads the messages of an mbox file one at a time.
type MboxReader struct {
	br      *bufio.Reader
	variant MboxVariant
	max     int64

	started  bool
	eof      bool
	fromLine []byte // the From_ line of the next message
	lb       []byte // line buffer
	lineNo   int
}

// NewMboxReader returns a reader of r; messages longer than maxSize bytes
// are skipped (0 means DefaultMaxMessageSize).
func NewMboxReader(r io.Reader, variant MboxVariant, maxSize int64) *MboxReader {
	if maxSize <= 0 {
		maxSize = DefaultMaxMessageSize
	}
	return &MboxReader{br: bufio.NewReaderSize(r, 64<<10), variant: variant, max: maxSize}
}

// readLine returns the next line including its line ending; the slice is
// valid until the next call. A line longer than the limit is cut (the
// message it belongs to is then too large anyway) and long is true.
func (r *MboxReader) readLine() (line []byte, long bool, err error) {
	r.lb = r.lb[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		if int64(len(r.lb)+len(frag)) <= r.max+2 {
			r.lb = append(r.lb, frag...)
		} else {
			long = true
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(r.lb) > 0 {
			r.lineNo++
		}
		return r.lb, long, err
	}
}

func isFromLine(line []byte) bool { return bytes.HasPrefix(line, []byte("From ")) }

func isEmptyLine(line []byte) bool {
	return len(line) == 1 && line[0] == '\n' || len(line) == 2 && line[0] == '\r' && line[1] == '\n'
}

// unquote undoes the From-quoting of one body line.
func (r *MboxReader) unquote(line []byte) []byte {
	if len(line) == 0 || line[0] != '>' {
		return line
	}
	switch r.variant {
	case MboxO:
		if bytes.HasPrefix(line, []byte(">From ")) {
			return line[1:]
		}
	default:
		i := 0
		for i < len(line) && line[i] == '>' {
			i++
		}
		if bytes.HasPrefix(line[i:], []byte("From ")) {
			return line[1:]
		}
	}
	return line
}

// Next returns the next message with its flags (from the status headers,
// which are removed) and internal date (from the From_ line), or io.EOF
// after the last one. A message over the size limit yields an error that
// wraps errTooLarge; reading can continue after it.
func (r *MboxReader) Next() (*Message, error) {
	if !r.started {
		r.started = true
		for {
			line, _, err := r.readLine()
			if isFromLine(line) {
				r.fromLine = bytes.Clone(line)
				break
			}
			if len(bytes.TrimSpace(line)) != 0 || err != nil {
				if err != nil && !errors.Is(err, io.EOF) {
					return nil, fmt.Errorf("read mbox: %w", err)
				}
				if len(line) == 0 && errors.Is(err, io.EOF) {
					r.eof = true
					return nil, io.EOF // an empty file is an empty mbox
				}
				return nil, ErrNotMbox
			}
		}
	}
	if r.eof || r.fromLine == nil {
		return nil, io.EOF
	}
	from := r.fromLine
	startLine := r.lineNo
	var buf []byte
	tooLarge := false
	prevEmpty := false
	for {
		line, long, err := r.readLine()
		if len(line) > 0 || long {
			// A From_ line starts a message after an empty line; without
			// one (writers that do not separate messages) only when it
			// carries a date, as an unquoted body line hardly does.
			if isFromLine(line) && (prevEmpty || hasFromDate(line)) {
				r.fromLine = bytes.Clone(line)
				break
			}
			prevEmpty = isEmptyLine(line)
			if !tooLarge {
				if long || int64(len(buf)+len(line)) > r.max+2 {
					tooLarge, buf = true, nil
				} else {
					buf = append(buf, r.unquote(line)...)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			r.eof = true
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read mbox line %d: %w", r.lineNo, err)
		}
	}
	if tooLarge {
		return nil, fmt.Errorf("message at line %d: %w (limit %d bytes)", startLine, errTooLarge, r.max)
	}
	// The empty line before the next From_ line (or at the end of the
	// file) separates messages and is not part of the message (RFC 4155).
	if prevEmpty {
		if bytes.HasSuffix(buf, []byte("\r\n")) {
			buf = buf[:len(buf)-2]
		} else {
			buf = buf[:len(buf)-1]
		}
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("message at line %d: empty: %w", startLine, errEmpty)
	}
	raw, flags, kws := takeStatusHeaders(buf)
	m := &Message{Raw: raw, Flags: flags, Keywords: kws}
	if t, ok := fromLineDate(from); ok {
		m.InternalDate = t
	} else {
		m.InternalDate = headerDate(raw)
	}
	return m, nil
}

// errEmpty marks an empty message (two From_ lines in a row).
var errEmpty = errors.New("empty message")

// fromLineLayouts are the date forms found after the sender on From_
// lines: asctime (RFC 4155 §2: "in UTC"), sometimes with a zone.
var fromLineLayouts = []string{
	"Mon Jan 2 15:04:05 2006",
	"Mon Jan 2 15:04:05 2006 -0700",
	"Mon Jan 2 15:04:05 MST 2006",
	"Mon Jan 2 15:04:05 -0700 2006",
	"Mon Jan 2 15:04 2006",
}

func hasFromDate(line []byte) bool {
	_, ok := fromLineDate(line)
	return ok
}

// fromLineDate parses the date of a From_ line ("From sender date"). The
// sender normally has no spaces, but some writers quote names with spaces,
// so the date is tried after each word.
func fromLineDate(line []byte) (time.Time, bool) {
	f := strings.Fields(strings.TrimPrefix(string(line), "From "))
	for k := 1; k < len(f) && k <= 4; k++ {
		s := strings.Join(f[k:], " ")
		for _, layout := range fromLineLayouts {
			if t, err := time.Parse(layout, s); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// headerDate is the message's Date: header, or zero (meaning now).
func headerDate(raw []byte) time.Time {
	for _, f := range message.HeaderFields(raw) {
		if strings.EqualFold(f.Name, "Date") {
			if t, ok := message.ParseDate(f.Unfolded()); ok {
				return t
			}
			return time.Time{}
		}
	}
	return time.Time{}
}
