package imapd

import (
	"pimail/internal/message"
)

// maxStructureDepth bounds recursion over hostile MIME trees (the parser
// bounds depth as well; this keeps the writer safe on its own).
const maxStructureDepth = 64

// writeEnvelope writes an ENVELOPE (appendEnvelope).
func (s *session) writeEnvelope(e *message.Envelope) {
	s.w.Bytes(s.appendEnvelope(s.w.AvailableBuffer(), e))
}

// writeBodyStructure writes BODY (ext false) or BODYSTRUCTURE (ext true),
// RFC 9051 §7.5.2, from the stored MIME tree.
func (s *session) writeBodyStructure(p *message.Part, ext bool) {
	s.writePart(p, ext, 0)
}

func (s *session) writePart(p *message.Part, ext bool, depth int) {
	w := s.w
	if p.Type == "multipart" && depth < maxStructureDepth {
		w.Byte('(')
		if len(p.Parts) == 0 {
			// body-type-mpart needs at least one part.
			s.writePart(&message.Part{Type: "text", Subtype: "plain"}, ext, depth+1)
		}
		for _, c := range p.Parts {
			s.writePart(c, ext, depth+1)
		}
		w.SP().String(orDefault(p.Subtype, "mixed"))
		if ext {
			w.SP()
			s.writeParams(p.Params)
			w.SP()
			s.writePartExt(p)
		}
		w.Byte(')')
		return
	}
	typ, sub := orDefault(p.Type, "text"), orDefault(p.Subtype, "plain")
	if p.Type == "multipart" {
		typ, sub = "text", "plain" // too deep
	}
	w.Byte('(').String(typ).SP().String(sub).SP()
	s.writeParams(p.Params)
	w.SP().NString(p.ID).SP().NString(p.Description).SP().String(orDefault(p.Encoding, "7bit")).SP().Int(p.Size)
	switch {
	case typ == "message" && (sub == "rfc822" || sub == "global"):
		env := p.Envelope
		if env == nil {
			env = &message.Envelope{}
		}
		w.SP()
		s.writeEnvelope(env)
		w.SP()
		inner := p.Message
		if inner == nil || depth >= maxStructureDepth {
			inner = &message.Part{Type: "text", Subtype: "plain"}
		}
		s.writePart(inner, ext, depth+1)
		w.SP().Int(p.Lines)
	case typ == "text":
		w.SP().Int(p.Lines)
	}
	if ext {
		w.SP().NString(p.MD5).SP()
		s.writePartExt(p)
	}
	w.Byte(')')
}

// writePartExt writes body-fld-dsp, body-fld-lang and body-fld-loc.
func (s *session) writePartExt(p *message.Part) {
	w := s.w
	if p.Disposition == "" {
		w.NIL()
	} else {
		w.Byte('(').String(p.Disposition).SP()
		s.writeParams(p.DispParams)
		w.Byte(')')
	}
	w.SP()
	switch len(p.Language) {
	case 0:
		w.NIL()
	case 1:
		w.String(p.Language[0])
	default:
		w.Byte('(')
		for i, l := range p.Language {
			if i > 0 {
				w.SP()
			}
			w.String(l)
		}
		w.Byte(')')
	}
	w.SP().NString(p.Location)
}

func (s *session) writeParams(ps []message.Param) {
	if len(ps) == 0 {
		s.w.NIL()
		return
	}
	s.w.Byte('(')
	for i, p := range ps {
		if i > 0 {
			s.w.SP()
		}
		s.w.String(p.Name).SP().String(p.Value)
	}
	s.w.Byte(')')
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
