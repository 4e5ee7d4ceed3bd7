package message

import "strings"

// Param returns the value of a Content-Type parameter (name in any case),
// or "" when absent. RFC 2231 continuations are already assembled.
func (p *Part) Param(name string) string {
	return paramValue(p.Params, strings.ToLower(name))
}

// DispParam returns the value of a Content-Disposition parameter, or "".
func (p *Part) DispParam(name string) string {
	return paramValue(p.DispParams, strings.ToLower(name))
}

// MIMEType returns "type/subtype".
func (p *Part) MIMEType() string { return p.Type + "/" + p.Subtype }

// Filename returns the part's file name, decoded to UTF-8: the
// Content-Disposition filename (RFC 2183 §2.3), else the Content-Type name.
// RFC 2047 encoded words, which many mailers put in these parameters
// against RFC 2047 §5, are decoded too.
func (p *Part) Filename() string {
	name := p.DispParam("filename")
	if name == "" {
		name = p.Param("name")
	}
	if name == "" {
		return ""
	}
	return DecodeHeaderValue(name)
}

// IsAttachment reports whether the part is meant as an attachment rather
// than as displayed body text.
func (p *Part) IsAttachment() bool {
	if p.Disposition == "attachment" {
		return true
	}
	return p.Disposition != "inline" && p.Type != "text" && p.Type != "multipart" && p.Filename() != ""
}

// Walk calls fn for p and every part below it, depth first in MIME order
// (multipart children, then an enclosed message's top part). Walking stops
// early when fn returns false.
func (p *Part) Walk(fn func(*Part) bool) bool {
	if p == nil {
		return true
	}
	if !fn(p) {
		return false
	}
	for _, c := range p.Parts {
		if !c.Walk(fn) {
			return false
		}
	}
	if p.Message != nil {
		return p.Message.Walk(fn)
	}
	return true
}
