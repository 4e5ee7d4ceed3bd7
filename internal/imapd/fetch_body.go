package imapd

import (
	"bytes"
	"strconv"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/message"
	"pimail/internal/store"
)

// rootPart returns the message's top-level MIME part from the index, or,
// when the index has none, a plain-text description of the whole message
// (its header found in raw when raw is at hand).
func rootPart(m *store.MessageMeta, raw []byte) *message.Part {
	if m.Parsed != nil && m.Parsed.Body != nil {
		return m.Parsed.Body
	}
	p := &message.Part{Type: "text", Subtype: "plain", Encoding: "7bit", Size: m.Size, End: m.Size,
		Params: []message.Param{{Name: "charset", Value: "us-ascii"}}}
	if raw != nil {
		p.BodyStart = int64(message.HeaderEnd(raw))
		p.End = int64(len(raw))
		p.Size = p.End - p.BodyStart
	}
	return p
}

func envelopeOf(m *store.MessageMeta) *message.Envelope {
	if m.Parsed != nil {
		return &m.Parsed.Envelope
	}
	return &message.Envelope{}
}

// slice returns raw[a:b] clamped to raw, never panicking on bad offsets.
func slice(raw []byte, a, b int64) []byte {
	n := int64(len(raw))
	a = min(max(a, 0), n)
	b = min(max(b, a), n)
	return raw[a:b]
}

func headerBytes(raw []byte, root *message.Part) []byte {
	return slice(raw, 0, root.BodyStart)
}

func textBytes(raw []byte, root *message.Part) []byte {
	return slice(raw, root.BodyStart, int64(len(raw)))
}

// children lists the parts numbered below p (RFC 9051 §6.4.5): the parts
// of a multipart, the parts of an encapsulated message, or for the
// top-level non-multipart body the body itself as part 1.
func children(p *message.Part, top bool) []*message.Part {
	switch {
	case p.Type == "multipart":
		return p.Parts
	case top:
		return []*message.Part{p}
	case p.Message != nil:
		if p.Message.Type == "multipart" {
			return p.Message.Parts
		}
		return []*message.Part{p.Message}
	}
	return nil
}

// resolvePart follows a part path such as 1.2.3 from the top-level part.
func resolvePart(root *message.Part, path []int) *message.Part {
	cur := root
	for i, n := range path {
		kids := children(cur, i == 0)
		if n < 1 || n > len(kids) {
			return nil
		}
		cur = kids[n-1]
	}
	return cur
}

// sectionBytes returns the bytes of a body section, or false when the
// section does not exist in this message.
func sectionBytes(raw []byte, root *message.Part, sec *imapwire.Section) ([]byte, bool) {
	var hdr, text []byte
	if len(sec.Part) == 0 {
		if sec.Text == "" {
			return raw, true
		}
		hdr, text = headerBytes(raw, root), textBytes(raw, root)
	} else {
		p := resolvePart(root, sec.Part)
		if p == nil {
			return nil, false
		}
		switch sec.Text {
		case "":
			return slice(raw, p.BodyStart, p.End), true
		case "MIME":
			return slice(raw, p.HeaderStart, p.BodyStart), true
		}
		if p.Message == nil {
			return nil, false
		}
		hdr = slice(raw, p.Message.HeaderStart, p.Message.BodyStart)
		text = slice(raw, p.Message.BodyStart, p.Message.End)
	}
	switch sec.Text {
	case "HEADER":
		return hdr, true
	case "TEXT":
		return text, true
	}
	return filterHeader(hdr, sec.Fields, sec.Text == "HEADER.FIELDS.NOT"), true
}

// filterHeader keeps (or drops, for .NOT) the named fields and ends the
// result with the blank line (RFC 9051 §6.4.5 HEADER.FIELDS).
func filterHeader(hdr []byte, names []string, not bool) []byte {
	var out []byte
	for _, f := range message.HeaderFields(hdr) {
		in := false
		for _, n := range names {
			if strings.EqualFold(n, f.Name) {
				in = true
				break
			}
		}
		if in != not {
			out = append(out, f.Raw...)
		}
	}
	return append(out, '\r', '\n')
}

// sectionName is the canonical response name of a section, "BODY[1.HEADER]".
func sectionName(prefix string, sec *imapwire.Section) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('[')
	for i, n := range sec.Part {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.Itoa(n))
	}
	if sec.Text != "" {
		if len(sec.Part) > 0 {
			b.WriteByte('.')
		}
		b.WriteString(sec.Text)
		if len(sec.Fields) > 0 {
			b.WriteString(" (")
			for i, f := range sec.Fields {
				if i > 0 {
					b.WriteByte(' ')
				}
				if strings.ContainsAny(f, " \"\\") {
					b.WriteString(strconv.Quote(f))
				} else {
					b.WriteString(f)
				}
			}
			b.WriteByte(')')
		}
	}
	b.WriteByte(']')
	return b.String()
}

// applyPartial cuts <origin.count> out of data (RFC 9051 §6.4.5).
func applyPartial(data []byte, p *imapwire.Partial) []byte {
	if p == nil {
		return data
	}
	if p.Origin >= int64(len(data)) {
		return nil
	}
	data = data[p.Origin:]
	if p.HasCount && p.Count < int64(len(data)) {
		data = data[:p.Count]
	}
	return data
}

// writeBodySection writes BODY[section]<origin> and its data.
func (s *session) writeBodySection(a imapwire.FetchAtt, raw []byte, root *message.Part) {
	s.w.Raw(sectionName("BODY", a.Section))
	if a.Partial != nil {
		s.w.Byte('<').Int(a.Partial.Origin).Byte('>')
	}
	s.w.SP()
	data, ok := sectionBytes(raw, root, a.Section)
	if !ok {
		s.w.NIL()
		return
	}
	s.w.Literal(applyPartial(data, a.Partial))
}

// writeBinary writes BINARY[part] (content transfer encoding undone) or
// BINARY.SIZE[part] (RFC 3516 §4.2).
func (s *session) writeBinary(a imapwire.FetchAtt, raw []byte, root *message.Part) {
	var data []byte
	ok := true
	if len(a.Section.Part) == 0 {
		data = raw
	} else if p := resolvePart(root, a.Section.Part); p == nil {
		ok = false
	} else if p.Type == "multipart" || p.Message != nil {
		data = slice(raw, p.BodyStart, p.End)
	} else {
		data = message.DecodeTransfer(slice(raw, p.BodyStart, p.End), p.Encoding)
	}
	if a.Name == "BINARY.SIZE[]" {
		s.w.Raw(sectionName("BINARY.SIZE", a.Section)).SP().Int(int64(len(data)))
		return
	}
	s.w.Raw(sectionName("BINARY", a.Section))
	if a.Partial != nil {
		s.w.Byte('<').Int(a.Partial.Origin).Byte('>')
	}
	s.w.SP()
	if !ok {
		s.w.NIL()
		return
	}
	data = applyPartial(data, a.Partial)
	if bytes.IndexByte(data, 0) >= 0 {
		s.w.Byte('~') // literal8 (RFC 3516 §4.2)
	}
	s.w.Literal(data)
}
