package store

import (
	"html"
	"strings"

	"pimail/internal/message"
)

// This file defines what IMAP TEXT and BODY search through (RFC 9051
// §6.4.4), once for every Store implementation, their full-text indexes and
// the storetest reference scan, so that an index and a brute-force scan
// agree byte for byte.

// maxSearchDepth bounds MIME and message/rfc822 nesting walked for text.
const maxSearchDepth = 20

// SearchableText is the text a message is searched in, lower-cased with
// strings.ToLower: a string is "contained" when its lower-cased form is a
// substring of Header or Body.
type SearchableText struct {
	// Header holds one line "name: value\n" per top-level header field,
	// the value unfolded and RFC 2047-decoded. TEXT searches it ("the
	// header … of the message"); field names are part of the header.
	Header string
	// Body is the decoded text of every text/* part (transfer encoding
	// undone, charset converted to UTF-8, HTML reduced to its text), and
	// the header lines of enclosed messages, each followed by "\n".
	Body string
}

// ExtractSearchableText computes the searchable text of raw. parsed is the
// message's stored structure; nil parses raw.
func ExtractSearchableText(raw []byte, parsed *message.Parsed) SearchableText {
	if parsed == nil || parsed.Body == nil {
		parsed = message.Parse(raw)
	}
	root := parsed.Body
	var h strings.Builder
	writeHeaderLines(&h, clip(raw, 0, root.BodyStart))
	var b strings.Builder
	collectBodyText(&b, raw, root, 0)
	return SearchableText{Header: strings.ToLower(h.String()), Body: strings.ToLower(b.String())}
}

// HeaderFieldContains reports whether the top-level header of raw has a
// field named name (any case) whose decoded value contains needle (case
// folded as in SearchableText); an empty needle asks whether the field is
// present (RFC 9051 §6.4.4 HEADER).
func HeaderFieldContains(raw []byte, parsed *message.Parsed, name, needle string) bool {
	if parsed == nil || parsed.Body == nil {
		parsed = message.Parse(raw)
	}
	needle = strings.ToLower(needle)
	for _, f := range message.HeaderFields(clip(raw, 0, parsed.Body.BodyStart)) {
		if !strings.EqualFold(f.Name, name) {
			continue
		}
		if needle == "" || strings.Contains(strings.ToLower(message.DecodeHeaderValue(f.Unfolded())), needle) {
			return true
		}
	}
	return false
}

// ContainsFold is the case-insensitive substring match of RFC 9051 §6.4.4
// used for header columns (SUBJECT, FROM, …).
func ContainsFold(hay, needle string) bool {
	return strings.Contains(strings.ToLower(hay), strings.ToLower(needle))
}

func writeHeaderLines(b *strings.Builder, header []byte) {
	for _, f := range message.HeaderFields(header) {
		b.WriteString(f.Name)
		b.WriteString(": ")
		b.WriteString(message.DecodeHeaderValue(f.Unfolded()))
		b.WriteByte('\n')
	}
}

func collectBodyText(b *strings.Builder, raw []byte, p *message.Part, depth int) {
	if p == nil || depth > maxSearchDepth {
		return
	}
	switch {
	case p.Type == "multipart":
		for _, c := range p.Parts {
			collectBodyText(b, raw, c, depth+1)
		}
	case p.Message != nil:
		writeHeaderLines(b, clip(raw, p.Message.HeaderStart, p.Message.BodyStart))
		collectBodyText(b, raw, p.Message, depth+1)
	case p.Type == "text":
		t, err := message.DecodeText(raw, p)
		if err != nil {
			return
		}
		if p.Subtype == "html" {
			t = HTMLText(t)
		}
		b.WriteString(t)
		b.WriteByte('\n')
	}
}

// clip returns raw[a:b] with the offsets clamped to raw.
func clip(raw []byte, a, b int64) []byte {
	n := int64(len(raw))
	a = min(max(a, 0), n)
	b = min(max(b, a), n)
	return raw[a:b]
}

// HTMLText reduces HTML to the text a reader sees: tags and comments are
// dropped, the content of script, style and head elements too, block
// elements become line breaks and character references are decoded
// (HTML 5 §13.2 is far richer; this is the subset search needs).
func HTMLText(s string) string {
	var b strings.Builder
	b.Grow(len(s) / 2)
	text := func(t string) {
		if strings.IndexByte(t, '&') >= 0 {
			t = html.UnescapeString(t)
		}
		b.WriteString(t)
	}
	for len(s) > 0 {
		lt := strings.IndexByte(s, '<')
		if lt < 0 {
			text(s)
			break
		}
		text(s[:lt])
		s = s[lt:]
		if len(s) > 1 && !isTagStart(s[1]) {
			// "<" not followed by a tag name is text (HTML 5 §13.2.5.6).
			text("<")
			s = s[1:]
			continue
		}
		if strings.HasPrefix(s, "<!--") {
			end := strings.Index(s[4:], "-->")
			if end < 0 {
				break
			}
			s = s[4+end+3:]
			continue
		}
		gt := strings.IndexByte(s, '>')
		if gt < 0 {
			text(s) // a stray '<' at the end is text
			break
		}
		name := tagName(s[1:gt])
		s = s[gt+1:]
		switch name {
		case "script", "style", "head", "title":
			// Skip to the matching end tag (title is shown by
			// the client, not in the body).
			end := strings.Index(strings.ToLower(s), "</"+name)
			if end < 0 {
				s = ""
				continue
			}
			s = s[end:]
		case "br", "p", "/p", "div", "/div", "tr", "/tr", "li", "h1", "h2", "h3", "h4", "h5", "h6",
			"/h1", "/h2", "/h3", "/h4", "/h5", "/h6", "table", "/table", "blockquote", "/blockquote", "hr":
			b.WriteByte('\n')
		case "td", "th":
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// tagName returns the lower-case name of a tag body ("a href=…" → "a",
// "/div" → "/div").
func tagName(t string) string {
	end := 0
	for end < len(t) {
		c := t[end]
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '/' && end > 0 || c == '>' {
			break
		}
		end++
	}
	return strings.ToLower(t[:end])
}

func isTagStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '/' || c == '!' || c == '?'
}
