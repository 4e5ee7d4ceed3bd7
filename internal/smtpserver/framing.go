package smtpserver

import "bytes"

// framer turns the bytes a client sends after DATA (or in BDAT chunks)
// into message content. It is the one place where pimail decides where a
// message ends and what its lines are; the rules:
//
//   - End of data is CR LF "." CR LF, the first "." of the data counting
//     as at the start of a line (RFC 5321 §4.1.1.4). BDAT data has no end
//     marker (RFC 3030 §2): its length is given.
//   - A "." between line breaks that are not both CR LF — "<LF>.<LF>",
//     "<CR><LF>.<LF>", "<LF>.<CR><LF>", "<CR>.<CR>", "<CR><LF>.<CR><CR><LF>",
//     "<CR><LF>.<CR>x" and every other such form, in DATA and BDAT alike —
//     is how SMTP smuggling (2023) ends a message early for one server and
//     not for the next: some servers end lines at a bare LF, some at a
//     bare CR, Postfix strips every CR before the LF. Only these are
//     refused (smuggle), and only after the real end of data, so the
//     session stays in step and whatever the client sent after the
//     marker is never read as commands.
//   - Everything else is normalized as Postfix ≥ 3.9 does (its
//     smtpd_forbid_bare_newline = normal): a line ends at LF, the CRs right
//     before that LF are dropped, and the line is stored with CR LF; a
//     bare CR inside a line is kept. So a bare LF becomes CR LF,
//     "text<CR><CR><LF>" becomes "text<CR><LF>", "a<CR>b" stays.
//   - In DATA, a line that starts with "." loses that dot (RFC 5321
//     §4.5.2), lines that end at a bare LF included, as Postfix reads them.
//   - A line longer than the limit (LF to LF) stops the framer (tooLong):
//     the caller closes the session, because the rest of the line is not
//     read (RFC 5321 §4.5.3.1.6 allows 1,000 octets; the limit is higher,
//     for the real mail that has longer lines).
//
// The framer keeps its state between calls, so the data may arrive in any
// pieces. Its common case, a line that starts with neither "." nor a
// line break and holds exactly one CR, right before its LF, is copied in
// runs found with bytes.IndexByte; everything else goes through step, one
// byte at a time.
type framer struct {
	dotStuffed bool // DATA; BDAT data is not dot-stuffed
	maxLine    int  // longest line, LF to LF; <= 0: no limit

	atLine bool // the next byte starts a line (after an LF, or the first byte)
	crlf   bool // the line break before this line was CR LF (or the start)
	crs    int  // CRs held back: a run whose next byte is not known yet
	dot    int  // a "." held at the start of a line: 1, or 2 with a CR after it
	crDot  bool // the byte before was a "." right after a bare CR
	line   int  // bytes of the current line so far

	smuggle bool // an ambiguous end-of-data sequence was seen
	tooLong bool // a line passed maxLine
	done    bool // end of data (DATA only)
	out     []byte
}

func newFramer(dotStuffed bool, maxLine int) framer {
	return framer{dotStuffed: dotStuffed, maxLine: maxLine, atLine: true, crlf: true}
}

// feed takes the next piece of data, appends its content to f.out and
// returns how many bytes of p it consumed: all of them, unless it found
// the end of data (f.done) or a line too long (f.tooLong), in which case
// what follows belongs to the next command, or to nobody.
func (f *framer) feed(p []byte) int {
	i := 0
	for i < len(p) && !f.done && !f.tooLong {
		if f.atLine && f.crlf && f.crs == 0 && f.dot == 0 {
			// The common case: whole clean lines, copied as they are.
			n := f.cleanLines(p[i:])
			if n > 0 {
				f.out = append(f.out, p[i:i+n]...)
				i += n
				continue
			}
		}
		f.step(p[i])
		i++
	}
	return i
}

// cleanLines returns the length of the run of clean lines at the start of
// p: each starts with neither ".", CR nor LF, ends in CR LF, has no other
// CR and fits the line limit. The framer's state after them is the state
// before them: at the start of a line after a CR LF.
func (f *framer) cleanLines(p []byte) int {
	n := 0
	for n < len(p) {
		c := p[n]
		if c == '.' || c == '\r' || c == '\n' {
			return n
		}
		j := bytes.IndexByte(p[n:], '\n')
		if j < 1 || p[n+j-1] != '\r' || (f.maxLine > 0 && j+1 > f.maxLine) {
			return n
		}
		if bytes.IndexByte(p[n:n+j-1], '\r') >= 0 {
			return n
		}
		n += j + 1
	}
	return n
}

// step takes one byte. The states are explained on the fields; the byte
// after a held "." or a CR run decides what they were.
func (f *framer) step(b byte) {
	if b == '\n' {
		f.line = 0
	} else if f.line++; f.maxLine > 0 && f.line >= f.maxLine {
		f.tooLong = true
		return
	}
	switch {
	case f.dot == 1: // "." at the start of a line
		switch b {
		case '\n': // "." LF: a line of a dot to a server that ends lines at LF
			f.smuggle = true
			f.dot = 0
			f.lineEnd(false)
		case '\r':
			f.dot = 2
		default:
			f.dot = 0
			if !f.dotStuffed {
				f.out = append(f.out, '.')
			}
			f.midLine(b)
		}
	case f.dot == 2: // "." CR at the start of a line
		f.dot = 0
		if b == '\n' && f.crlf {
			if f.dotStuffed {
				f.done = true // CR LF "." CR LF (RFC 5321 §4.1.1.4)
				return
			}
			f.out = append(f.out, ".\r\n"...) // BDAT: a line of a dot is text
			f.lineEnd(true)
			return
		}
		// "." CR after a bare LF, "." CR CR, "." CR x: a line of a dot to
		// a server that ends lines at LF, strips CRs, or ends lines at CR.
		f.smuggle = true
		f.crs = 1
		f.afterCRs(b)
	case f.crs > 0:
		f.afterCRs(b)
	case f.crDot:
		f.crDot = false
		if b == '\r' || b == '\n' {
			f.smuggle = true // CR "." CR or CR "." LF
		}
		f.midLine(b)
	case f.atLine && b == '.':
		f.atLine = false
		f.dot = 1
	default:
		f.midLine(b)
	}
}

// afterCRs takes the byte after a run of f.crs CRs.
func (f *framer) afterCRs(b byte) {
	switch b {
	case '\r':
		f.crs++
	case '\n': // the CRs before an LF are dropped: the line ends in CR LF
		f.crs = 0
		f.out = append(f.out, '\r', '\n')
		f.lineEnd(true)
	default: // bare CRs inside a line are kept
		for ; f.crs > 0; f.crs-- {
			f.out = append(f.out, '\r')
		}
		f.atLine = false
		if b == '.' {
			f.crDot = true // a line of a dot to a server that ends lines at CR?
		}
		f.out = append(f.out, b)
	}
}

// midLine takes a byte inside a line, or the first byte of one that is
// not ".".
func (f *framer) midLine(b byte) {
	f.atLine = false
	switch b {
	case '\r':
		f.crs = 1
	case '\n': // a bare LF ends the line; it is stored as CR LF
		f.out = append(f.out, '\r', '\n')
		f.lineEnd(false)
	default:
		f.out = append(f.out, b)
	}
}

func (f *framer) lineEnd(crlf bool) {
	f.atLine, f.crlf = true, crlf
}

// finishChunks ends BDAT data: CRs still held were the last bytes, and are
// kept (the message ends in a bare CR, which no line break follows).
func (f *framer) finishChunks() {
	if f.dot > 0 {
		// A "." (and CR) at the very end: harmless as BDAT content, but
		// "." CR alone is a line of a dot to a server that ends lines at CR.
		if f.dot == 2 {
			f.smuggle = true
		}
		f.out = append(f.out, '.')
		f.dot = 0
	}
	for ; f.crs > 0; f.crs-- {
		f.out = append(f.out, '\r')
	}
	f.crDot = false
}
