package webmail

import (
	"strings"

	"pimail/internal/message"
)

// attachment is one downloadable part.
type attachment struct {
	Index int
	Name  string
	Type  string
	Size  string
}

// block is one displayed unit of a message body: a text part, or the
// alternatives of one multipart/alternative (RFC 2046 §5.1.4). plain and
// html are Walk indices of its text/plain and text/html forms, -1 where it
// has none.
type block struct {
	plain, html int
}

// layout is what the read page shows of a message: its blocks in MIME
// order, and every other part that carries content, as attachments.
type layout struct {
	blocks      []block
	attachments []attachment
}

// hasPlain and hasHTML say whether some block has that form.
func (l *layout) hasPlain() bool { return l.any(func(b block) bool { return b.plain >= 0 }) }
func (l *layout) hasHTML() bool  { return l.any(func(b block) bool { return b.html >= 0 }) }

func (l *layout) any(f func(block) bool) bool {
	for _, b := range l.blocks {
		if f(b) {
			return true
		}
	}
	return false
}

// maxBlocks and maxAttachments bound what one page lists.
const (
	maxBlocks      = 100
	maxAttachments = 500
)

// messageLayout walks the MIME tree (issue 22: every displayable part is
// shown, in order, and none is silently left out):
//   - multipart/alternative is one block, its last text/plain and its last
//     text/html (or multipart/related with an HTML root) the two forms;
//   - multipart/related shows its root; the other parts are the root's
//     resources (cid: images), neither shown nor listed;
//   - any other multipart shows each child in turn;
//   - an inline text/plain or text/html part is a block of its own;
//   - everything else (attachments, other text types, images, enclosed
//     messages, and inline parts beyond the bounds) is listed.
func messageLayout(root *message.Part) layout {
	idx := map[*message.Part]int{}
	i := 0
	root.Walk(func(p *message.Part) bool {
		idx[p] = i
		i++
		return true
	})
	var l layout
	var walk func(p *message.Part)
	attach := func(p *message.Part) {
		if len(l.attachments) < maxAttachments {
			name := safeFilename(message.Visible(p.Filename()), p)
			l.attachments = append(l.attachments, attachment{Index: idx[p], Name: name, Type: p.MIMEType(), Size: formatSize(p.Size)})
		}
	}
	addBlock := func(b block, p *message.Part) {
		if len(l.blocks) >= maxBlocks {
			attach(p)
			return
		}
		l.blocks = append(l.blocks, b)
	}
	walk = func(p *message.Part) {
		switch {
		case p.Type == "multipart" && p.Subtype == "alternative":
			b := block{plain: -1, html: -1}
			for _, c := range p.Parts {
				switch {
				case isBodyText(c, "plain"):
					b.plain = idx[c]
				case isBodyText(c, "html"):
					b.html = idx[c]
				case c.Type == "multipart" && c.Subtype == "related" && len(c.Parts) > 0 && isBodyText(c.Parts[0], "html"):
					b.html = idx[c.Parts[0]]
				}
			}
			if b.plain < 0 && b.html < 0 && len(p.Parts) > 0 {
				walk(p.Parts[len(p.Parts)-1]) // the richest form, whatever it is
				return
			}
			addBlock(b, p)
		case p.Type == "multipart" && p.Subtype == "related":
			if len(p.Parts) > 0 {
				walk(p.Parts[0])
			}
			for _, c := range p.Parts[min(1, len(p.Parts)):] {
				if c.IsAttachment() {
					attach(c)
				}
			}
		case p.Type == "multipart":
			for _, c := range p.Parts {
				walk(c)
			}
		case isBodyText(p, "plain"):
			addBlock(block{plain: idx[p], html: -1}, p)
		case isBodyText(p, "html"):
			addBlock(block{plain: -1, html: idx[p]}, p)
		default:
			attach(p)
		}
	}
	walk(root)
	return l
}

// isBodyText: a text part of that subtype meant to be read in the body,
// not an attachment.
func isBodyText(p *message.Part, subtype string) bool {
	return p.Type == "text" && p.Subtype == subtype && !p.IsAttachment() && p.Disposition != "attachment"
}

// attachments lists the parts of a message that are not shown in its
// body (see messageLayout).
func attachments(root *message.Part) []attachment { return messageLayout(root).attachments }

// partAt returns the n-th part in Walk order.
func partAt(root *message.Part, n int) *message.Part {
	var found *message.Part
	i := -1
	root.Walk(func(p *message.Part) bool {
		i++
		if i == n {
			found = p
		}
		return found == nil
	})
	return found
}

// blockText returns the text of every block, the plain form where there
// is one and the HTML form's text otherwise, separated by a rule line.
func blockText(raw []byte, root *message.Part, l layout) string {
	var b strings.Builder
	for i, bl := range l.blocks {
		if i > 0 {
			b.WriteString("\n----------\n\n")
		}
		if bl.plain >= 0 {
			if t, err := message.DecodeText(raw, partAt(root, bl.plain)); err == nil {
				b.WriteString(t)
			}
			continue
		}
		if t, err := message.DecodeText(raw, partAt(root, bl.html)); err == nil {
			b.WriteString(htmlToText(t))
		}
	}
	return b.String()
}
