package message

import "bytes"

// Field is one header field as it appears in a header block.
type Field struct {
	// Name is the field name as written (case kept), without the white
	// space that obsolete syntax allows before the colon (RFC 5322 §4.5.8).
	Name string
	// Raw is the whole field: name, colon, value, folded continuation lines
	// and the final line ending. IMAP BODY[HEADER.FIELDS] returns these bytes.
	Raw []byte
	// Value is everything after the colon up to (not including) the final
	// line ending, still folded.
	Value []byte
}

// Unfolded returns the field value unfolded (RFC 5322 §2.2.3) and trimmed.
func (f Field) Unfolded() string { return unfold(f.Value) }

// HeaderFields splits a header block (for example raw[p.HeaderStart:p.BodyStart])
// into its fields, in order. Lines that are not fields (no colon, stray
// continuation lines) are skipped. Scanning stops at the first empty line.
func HeaderFields(header []byte) []Field {
	var out []Field
	ScanFields(header, func(f RawField) bool {
		out = append(out, Field{Name: string(f.Name), Raw: header[f.Start:f.End:f.End], Value: f.Value})
		return true
	})
	return out
}

// rawField is one field found by headerReader; slices alias the raw message.
type rawField struct {
	name       []byte
	value      []byte // folded, without the final line ending
	start, end int    // the field's bytes, final line ending included
}

// headerReader walks the header fields of buf[pos:end]. Lines may end in
// CRLF or a bare LF. The header ends at the first empty line (RFC 5322 §2.1);
// bodyStart is then the offset after that line. A header without an empty
// line runs to end.
type headerReader struct {
	buf       []byte
	pos, end  int
	bodyStart int
	done      bool
	// noHeaderIfGarbage makes the header empty when its first line is
	// neither a field nor an empty line: a MIME part that starts directly
	// with its body (broken, but common).
	noHeaderIfGarbage bool
	seenLine          bool
}

// isWSP reports whether c is SP or HTAB (RFC 5234 WSP).
func isWSP(c byte) bool { return c == ' ' || c == '\t' }

// fieldNameEnd returns the index of the colon ending a field name at the
// start of line, or -1. Field names are printable US-ASCII except colon
// (RFC 5322 §2.2); white space before the colon is tolerated (§4.5.8).
func fieldNameEnd(line []byte) int {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == ':' {
			break
		}
		if c < 33 || c > 126 {
			break
		}
		i++
	}
	if i == 0 {
		return -1
	}
	j := i
	for j < len(line) && isWSP(line[j]) {
		j++
	}
	if j < len(line) && line[j] == ':' {
		return j
	}
	return -1
}

// lineAt returns the end of the line starting at pos (index of '\n', or
// end) and the start of the next line.
func lineAt(buf []byte, pos, end int) (lineEnd, next int) {
	i := bytes.IndexByte(buf[pos:end], '\n')
	if i < 0 {
		return end, end
	}
	return pos + i, pos + i + 1
}

func (h *headerReader) finish(bodyStart int) {
	h.done = true
	h.bodyStart = bodyStart
	h.pos = bodyStart
}

// next returns the next field, or ok == false at the end of the header.
func (h *headerReader) next() (f rawField, ok bool) {
	for !h.done {
		if h.pos >= h.end {
			h.finish(h.end)
			break
		}
		lineStart := h.pos
		lineEnd, next := lineAt(h.buf, lineStart, h.end)
		content := h.buf[lineStart:lineEnd]
		if n := len(content); n > 0 && content[n-1] == '\r' {
			content = content[:n-1]
		}
		first := !h.seenLine
		h.seenLine = true
		if len(content) == 0 {
			// The empty line that separates header and body.
			h.finish(next)
			break
		}
		colon := -1
		if !isWSP(content[0]) {
			colon = fieldNameEnd(content)
		}
		if colon < 0 {
			if first && h.noHeaderIfGarbage {
				h.finish(lineStart)
				break
			}
			// Not a field: a stray continuation or a garbage line. It stays
			// in the header bytes but carries no field.
			h.pos = next
			continue
		}
		// Extend over continuation lines (RFC 5322 §2.2.3).
		fend := next
		for fend < h.end && isWSP(h.buf[fend]) {
			_, fend = lineAt(h.buf, fend, h.end)
		}
		vend := fend
		if vend > lineStart && h.buf[vend-1] == '\n' {
			vend--
			if vend > lineStart && h.buf[vend-1] == '\r' {
				vend--
			}
		}
		name := content[:colon]
		for len(name) > 0 && isWSP(name[len(name)-1]) {
			name = name[:len(name)-1]
		}
		vstart := lineStart + colon + 1
		if vstart > vend {
			vstart = vend
		}
		h.pos = fend
		return rawField{name: name, value: h.buf[vstart:vend], start: lineStart, end: fend}, true
	}
	return rawField{}, false
}

// unfold removes the line breaks of a folded value (RFC 5322 §2.2.3: a CRLF
// followed by WSP is removed) and trims surrounding white space.
func unfold(v []byte) string {
	v = trimWSP(v)
	if bytes.IndexByte(v, '\n') < 0 {
		return string(v)
	}
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\n' {
			continue
		}
		if c == '\r' && i+1 < len(v) && v[i+1] == '\n' {
			continue
		}
		out = append(out, c)
	}
	return string(trimWSP(out))
}

// trimWSP trims spaces, tabs and line breaks at both ends.
func trimWSP(v []byte) []byte {
	for len(v) > 0 && (isWSP(v[0]) || v[0] == '\r' || v[0] == '\n') {
		v = v[1:]
	}
	for len(v) > 0 {
		c := v[len(v)-1]
		if !isWSP(c) && c != '\r' && c != '\n' {
			break
		}
		v = v[:len(v)-1]
	}
	return v
}
