package dkim

import (
	"bytes"
	"hash"
	"strings"

	"pimail/internal/message"
)

// Canonicalization algorithms (RFC 6376 §3.4).
const (
	Simple  = "simple"
	Relaxed = "relaxed"
)

// CanonHeader returns a header field canonicalized (RFC 6376 §3.4.1,
// §3.4.2), ending in CRLF. raw is the whole field as it appears in the
// message (name, colon, folded value, line ending).
func CanonHeader(raw []byte, relaxed bool) []byte {
	if !relaxed {
		// simple: the field unchanged; a bare LF is written as the CRLF
		// that the message has on the wire.
		out := make([]byte, 0, len(raw)+2)
		out = appendCRLF(out, raw)
		if !bytes.HasSuffix(out, []byte("\r\n")) {
			out = append(out, '\r', '\n')
		}
		return out
	}
	colon := bytes.IndexByte(raw, ':')
	if colon < 0 {
		return nil
	}
	// relaxed: the name in lower case, no white space around the colon,
	// the value unfolded, runs of WSP as one SP, none at the ends.
	name := strings.ToLower(strings.TrimRight(string(raw[:colon]), " \t"))
	out := make([]byte, 0, len(raw)+2)
	out = append(out, name...)
	out = append(out, ':')
	out = appendRelaxedValue(out, raw[colon+1:])
	return append(out, '\r', '\n')
}

// appendRelaxedValue appends v unfolded, with WSP runs reduced to one
// space and none at either end.
func appendRelaxedValue(out, v []byte) []byte {
	space := false
	start := len(out)
	for _, c := range v {
		switch c {
		case '\r', '\n':
			continue
		case ' ', '\t':
			space = true
			continue
		}
		if space && len(out) > start {
			out = append(out, ' ')
		}
		space = false
		out = append(out, c)
	}
	return out
}

// appendCRLF appends b with every bare LF as CRLF.
func appendCRLF(out, b []byte) []byte {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return append(out, b...)
		}
		if i > 0 && b[i-1] == '\r' {
			out = append(out, b[:i+1]...)
		} else {
			out = append(out, b[:i]...)
			out = append(out, '\r', '\n')
		}
		b = b[i+1:]
	}
	return out
}

// bodyHasher writes a canonicalized body (RFC 6376 §3.4.3, §3.4.4) into
// a hash, the first limit octets of it when limit >= 0 (the l= tag,
// §3.4.5), and counts the canonical length.
type bodyHasher struct {
	h       hash.Hash
	relaxed bool
	limit   int64 // -1: all
	n       int64 // canonical octets produced
	empty   int   // empty lines held back: trailing ones are dropped
}

func (b *bodyHasher) emit(p []byte) {
	b.n += int64(len(p))
	if b.limit >= 0 {
		done := b.n - int64(len(p))
		if done >= b.limit {
			return
		}
		if rest := b.limit - done; int64(len(p)) > rest {
			p = p[:rest]
		}
	}
	b.h.Write(p)
}

var crlf = []byte("\r\n")

// line adds one body line, without its line ending.
func (b *bodyHasher) line(l []byte) {
	if b.relaxed {
		l = relaxedLine(l)
	}
	if len(l) == 0 {
		b.empty++
		return
	}
	for ; b.empty > 0; b.empty-- {
		b.emit(crlf)
	}
	b.emit(l)
	b.emit(crlf)
}

// relaxedLine reduces WSP runs to one SP and drops WSP at the line's end
// (§3.4.4). It reuses l's memory only when nothing changes.
func relaxedLine(l []byte) []byte {
	if bytes.IndexByte(l, '\t') < 0 && !bytes.Contains(l, []byte("  ")) && (len(l) == 0 || l[len(l)-1] != ' ') {
		return l
	}
	out := make([]byte, 0, len(l))
	space := false
	for _, c := range l {
		if c == ' ' || c == '\t' {
			space = true
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, c)
	}
	return out
}

// finish ends the body: simple canonicalization turns an empty body into
// one CRLF (§3.4.3); relaxed leaves it empty (§3.4.4).
func (b *bodyHasher) finish() {
	if !b.relaxed && b.n == 0 {
		b.emit(crlf)
	}
}

// hashBody canonicalizes body into h and returns the canonical length
// (all of it, also beyond limit). Lines end at LF; a CR before it is
// part of the line ending.
func hashBody(h hash.Hash, body []byte, relaxed bool, limit int64) int64 {
	b := &bodyHasher{h: h, relaxed: relaxed, limit: limit}
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		var l []byte
		if i < 0 {
			l, body = body, nil
		} else {
			l, body = body[:i], body[i+1:]
			if n := len(l); n > 0 && l[n-1] == '\r' {
				l = l[:n-1]
			}
		}
		b.line(l)
	}
	b.finish()
	return b.n
}

// pickFields selects the header fields that h= names (RFC 6376 §5.4.2):
// for each name, the last instance not yet used, from the bottom up; a
// name with no instance left contributes nothing (which is how listing a
// name once more than it occurs signs the absence of another one).
func pickFields(raw []byte, names []string) [][]byte {
	type inst struct{ fields [][]byte }
	byName := map[string]*inst{}
	for _, n := range names {
		byName[strings.ToLower(n)] = &inst{}
	}
	message.ScanFields(raw, func(f message.RawField) bool {
		if in, ok := byName[strings.ToLower(string(f.Name))]; ok {
			in.fields = append(in.fields, raw[f.Start:f.End])
		}
		return true
	})
	out := make([][]byte, 0, len(names))
	for _, n := range names {
		in := byName[strings.ToLower(n)]
		if k := len(in.fields); k > 0 {
			out = append(out, in.fields[k-1])
			in.fields = in.fields[:k-1]
		} else {
			out = append(out, nil)
		}
	}
	return out
}
