package webmail

import (
	"html"
	"html/template"
	"strings"

	"github.com/microcosm-cc/bluemonday"

	"pimail/internal/message"
)

// Formatted messages. The compose page's editor (plain JavaScript, a
// contenteditable element; static/app.js) posts its HTML; the server keeps
// only what composePolicy allows — text formatting, lists, quotes and
// http(s)/mailto links, no styles, images or anything that loads or runs —
// and sends it as multipart/alternative (RFC 2046 §5.1.4) with a text
// part made from it first. Plain text stays the default.

// maxHTMLBody bounds the editor's HTML.
const maxHTMLBody = 2 << 20

// composePolicy is what a formatted message may hold.
var composePolicy = func() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "div", "b", "strong", "i", "em", "u", "s", "strike", "blockquote", "ul", "ol", "li",
		"pre", "code", "hr", "h1", "h2", "h3", "sub", "sup")
	p.AllowAttrs("href").OnElements("a")
	p.RequireParseableURLs(true)
	p.AllowRelativeURLs(false)
	p.AllowURLSchemes("http", "https", "mailto")
	p.RequireNoReferrerOnLinks(true)
	return p
}()

// sanitizeCompose keeps the editor's HTML within composePolicy.
func sanitizeCompose(h string) string { return composePolicy.Sanitize(h) }

// textToHTML renders plain text for the editor: escaped, paragraphs kept
// as lines, runs of quoted lines ("> ") as a blockquote.
func textToHTML(text string) template.HTML {
	var b strings.Builder
	quoted := false
	for line := range strings.Lines(strings.ReplaceAll(text, "\r\n", "\n")) {
		line = strings.TrimSuffix(line, "\n")
		q := strings.HasPrefix(line, ">")
		if q != quoted {
			if q {
				b.WriteString("<blockquote>")
			} else {
				b.WriteString("</blockquote>")
			}
			quoted = q
		}
		if q {
			line = strings.TrimPrefix(strings.TrimPrefix(line, ">"), " ")
		}
		b.WriteString("<div>")
		if line == "" {
			b.WriteString("<br>")
		} else {
			b.WriteString(html.EscapeString(line))
		}
		b.WriteString("</div>")
	}
	if quoted {
		b.WriteString("</blockquote>")
	}
	return template.HTML(b.String())
}

// htmlDocument wraps a message's HTML part.
func htmlDocument(body string) string {
	return "<!doctype html>\n<html><head><meta charset=\"utf-8\"></head><body>\n" + body + "\n</body></html>\n"
}

// htmlBodyOf returns the first HTML body part of a message (a draft
// written formatted), decoded; "" when it has none.
func htmlBodyOf(raw []byte, root *message.Part) string {
	var part *message.Part
	root.Walk(func(p *message.Part) bool {
		if part == nil && p.Type == "text" && p.Subtype == "html" && !p.IsAttachment() {
			part = p
		}
		return part == nil
	})
	if part == nil {
		return ""
	}
	h, err := message.DecodeText(raw, part)
	if err != nil {
		return ""
	}
	return h
}
