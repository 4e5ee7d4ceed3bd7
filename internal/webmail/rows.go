package webmail

// The hot parts of the two busiest pages — the rows of a message list and
// the text of a plain message — are written here with plain string
// appends instead of html/template, whose per-action reflection and
// contextual escaping cost more than the rest of the request. Every string
// that came from mail goes through escapeHTML, which escapes the five
// characters that matter in element content and in double-quoted
// attribute values; URLs are written only after the scheme check in
// safeLinkURL. xss_test.go checks these paths.

import (
	"html/template"
	"pimail/internal/message"
	"strconv"
	"strings"
	"time"

	"pimail/internal/store"
)

// htmlSpecial marks the bytes escapeHTML replaces, and htmlEscape holds
// their replacements (NUL becomes U+FFFD, as html/template does it).
var (
	htmlSpecial = [256]bool{'&': true, '<': true, '>': true, '"': true, '\'': true, 0: true}
	htmlEscape  = [256]string{'&': "&amp;", '<': "&lt;", '>': "&gt;", '"': "&#34;", '\'': "&#39;", 0: "\uFFFD"}
)

// escapeHTML appends s to b with &, <, >, " and ' escaped, and NUL replaced
// (as html/template does).
func escapeHTML(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); i++ {
		if !htmlSpecial[s[i]] {
			continue
		}
		b = append(b, s[last:i]...)
		b = append(b, htmlEscape[s[i]]...)
		last = i + 1
	}
	return append(b, s[last:]...)
}

// safeLinkURL returns u when it is an http(s) or mailto URL (what linkify
// makes), else "".
func safeLinkURL(u string) string {
	l := len(u)
	switch {
	case l > 7 && strings.EqualFold(u[:7], "http://"),
		l > 8 && strings.EqualFold(u[:8], "https://"),
		l > 7 && strings.EqualFold(u[:7], "mailto:"):
		return u
	}
	return ""
}

// makeListRow is makeRow for a row of the store's list view.
func makeListRow(boxID int64, it *store.ListItem, showTo bool, now time.Time) row {
	rw := row{
		Box: boxID, UID: it.UID, Size: formatSize(it.Size), Subject: message.Visible(it.Subject),
		Seen: it.Flags&store.FlagSeen != 0, Flagged: it.Flags&store.FlagFlagged != 0,
		Answered: it.Flags&store.FlagAnswered != 0, Draft: it.Flags&store.FlagDraft != 0,
		Junk: hasKeyword(it.Keywords, "$Junk"), Attachment: it.HasAttachment,
	}
	if showTo {
		rw.Who, rw.WhoAddr = firstAddr(it.To)
	} else {
		rw.Who, rw.WhoAddr = firstAddr(it.From)
	}
	rw.Who, rw.WhoAddr = message.Visible(rw.Who), message.Visible(rw.WhoAddr)
	d := it.InternalDate
	if !it.Date.IsZero() && it.Date.Before(now.Add(24*time.Hour)) {
		d = it.Date
	}
	rw.Date = formatDate(d, now)
	rw.FullDate = d.Local().Format(time.RFC1123Z)
	return rw
}

// firstAddr returns a label and the address of the first entry of a decoded
// address list as the store keeps it ("Name <a@b>, c@d, Group: e@f;").
// A bare address has no space and contains '@'; anything else is
// "Name <addr>", whose name may itself contain commas.
func firstAddr(list string) (label, addr string) {
	s := strings.TrimSpace(list)
	// A group name ends with ':' before any address.
	if i := strings.IndexByte(s, ':'); i > 0 && !strings.ContainsAny(s[:i], "<@\"") {
		s = strings.TrimSpace(s[i+1:])
	}
	first := s
	if i := strings.Index(s, ", "); i >= 0 {
		first = s[:i]
	}
	if first != "" && !strings.ContainsAny(first, " <") && strings.Contains(first, "@") {
		first = strings.TrimRight(first, ";")
		return first, first
	}
	// "Name <addr>": the first '>' that ends an entry.
	end := -1
	for i := strings.IndexByte(s, '>'); i >= 0; {
		if i+1 == len(s) || s[i+1] == ',' || s[i+1] == ';' {
			end = i
			break
		}
		j := strings.IndexByte(s[i+1:], '>')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if end < 0 {
		return first, ""
	}
	lt := strings.LastIndexByte(s[:end], '<')
	if lt < 0 {
		return first, ""
	}
	addr = s[lt+1 : end]
	label = strings.TrimSpace(s[:lt])
	if label == "" {
		label = addr
	}
	return label, addr
}

// RowsHTML renders the list's rows (the table body of list.html).
func (d listData) RowsHTML() template.HTML {
	if d.rowsHTML != "" {
		return d.rowsHTML
	}
	if len(d.Rows) == 0 {
		return `<tr><td colspan="6" class="empty">No messages.</td></tr>`
	}
	b := make([]byte, 0, 600*len(d.Rows))
	for i := range d.Rows {
		b = d.appendRow(b, &d.Rows[i])
	}
	return template.HTML(b)
}

// attachIcon is the attachment mark: an inline SVG paper clip, which
// needs no emoji font.
const attachIcon = ` <svg class="att" viewBox="0 0 16 16" width="14" height="14" role="img" aria-label="Has attachments">` +
	`<title>Has attachments</title><path d="M10.5 4.5v6a2.5 2.5 0 0 1-5 0V4a1.5 1.5 0 0 1 3 0v6.5a.5.5 0 0 1-1 0V5" ` +
	`fill="none" stroke="currentColor" stroke-width="1.2" stroke-linecap="round"/></svg>`

func (d *listData) appendRow(b []byte, r *row) []byte {
	var href, open []byte
	if r.Draft {
		href = append(href, "/compose?mode=draft&amp;box="...)
		href = strconv.AppendInt(href, r.Box, 10)
		href = append(href, "&amp;uid="...)
		href = strconv.AppendUint(href, uint64(r.UID), 10)
		open = href
	} else {
		href = append(href, "/msg/"...)
		href = strconv.AppendInt(href, r.Box, 10)
		href = append(href, '/')
		href = strconv.AppendUint(href, uint64(r.UID), 10)
		open = href
		if d.Pane != "off" && d.Query == "" {
			// In the reading pane: the list page with the message open.
			open = append([]byte(nil), d.PageURL()...)
			open = strconv.AppendInt(open, int64(d.Page), 10)
			open = append(open, "&amp;msg="...)
			open = strconv.AppendUint(open, uint64(r.UID), 10)
		}
	}

	b = append(b, `<tr class="msg`...)
	if !r.Seen {
		b = append(b, " unread"...)
	}
	if r.Flagged {
		b = append(b, " flagged"...)
	}
	if r.Depth > 0 {
		b = append(b, " t"...)
		b = strconv.AppendUint(b, uint64(r.Depth), 10)
	}
	b = append(b, `" data-href="`...)
	b = append(b, href...)
	b = append(b, `" data-box="`...)
	b = strconv.AppendInt(b, r.Box, 10)
	b = append(b, `" data-uid="`...)
	b = strconv.AppendUint(b, uint64(r.UID), 10)
	b = append(b, "\" draggable=\"true\">\n<td class=\"sel\">"...)
	if d.Query == "" {
		b = append(b, `<input type="checkbox" name="uid" value="`...)
		b = strconv.AppendUint(b, uint64(r.UID), 10)
		b = append(b, `" aria-label="Select message">`...)
	}
	b = append(b, "</td>\n<td class=\"flags\">"...)
	if r.Flagged {
		b = append(b, `<span title="Flagged">&#9733;</span>`...)
	}
	if r.Answered {
		b = append(b, `<span title="Answered">&#8617;</span>`...)
	}
	if r.Junk {
		b = append(b, `<span class="junk">junk</span>`...)
	}
	b = append(b, "</td>\n<td class=\"who\" title=\""...)
	b = escapeHTML(b, r.WhoAddr)
	b = append(b, `">`...)
	b = escapeHTML(b, r.Who)
	b = append(b, "</td>\n<td class=\"subj\"><a href=\""...)
	b = append(b, open...)
	b = append(b, `">`...)
	if r.Subject != "" {
		b = escapeHTML(b, r.Subject)
	} else {
		b = append(b, "(no subject)"...)
	}
	b = append(b, "</a>"...)
	if r.Attachment {
		b = append(b, attachIcon...)
	}
	b = append(b, "</td>\n<td class=\"date\" title=\""...)
	b = escapeHTML(b, r.FullDate)
	b = append(b, `">`...)
	b = escapeHTML(b, r.Date)
	b = append(b, "</td>\n<td class=\"size\">"...)
	b = escapeHTML(b, r.Size)
	return append(b, "</td></tr>\n"...)
}

// TextHTML renders a plain text body (the content of #body-text).
func (d readData) TextHTML() template.HTML {
	if d.Body != "" {
		return d.Body
	}
	n := 0
	for i := range d.Text {
		n += len(d.Text[i].Text) + len(d.Text[i].URL)
	}
	var b strings.Builder // String() does not copy
	b.Grow(n + n/8 + 64)
	for i := range d.Text {
		sg := &d.Text[i]
		if u := safeLinkURL(sg.URL); u != "" {
			b.WriteString(`<a href="`)
			escapeTo(&b, u, false)
			b.WriteString(`" rel="noopener noreferrer" target="_blank">`)
			escapeTo(&b, sg.Text, false)
			b.WriteString("</a>")
			continue
		}
		if sg.Quote {
			b.WriteString(`<span class="q">`)
			escapeTo(&b, sg.Text, true)
			b.WriteString("</span>")
			continue
		}
		escapeTo(&b, sg.Text, true)
	}
	return template.HTML(b.String())
}

// textSlot stands in the read page for a plain text body that is already
// rendered: the page is executed without it and render writes the body in
// its place, so that a large body is not copied through html/template and
// fmt. Nothing from mail can produce it: every string from mail is escaped
// ('<' becomes "&lt;").
const textSlot = "<!--pimail:text-->"

// TextSlot is what read.html writes in #body-text.
func (d readData) TextSlot() template.HTML {
	if d.Body != "" {
		return textSlot
	}
	return d.TextHTML()
}

// spliced returns the text that replaces the page's textSlot.
func (d readData) spliced() (slot, text string) {
	if d.Body == "" {
		return "", ""
	}
	return textSlot, string(d.Body)
}

// escapeTo is escapeHTML writing to a strings.Builder; with crlf, a CR
// before LF is dropped (escapeText).
func escapeTo(b *strings.Builder, s string, crlf bool) {
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !htmlSpecial[c] && (c != '\r' || !crlf || i+1 == len(s) || s[i+1] != '\n') {
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(htmlEscape[c]) // "" for the CR of a CRLF
		last = i + 1
	}
	b.WriteString(s[last:])
}

// NavHTML renders the folder list of the sidebar.
func (v view) NavHTML() template.HTML {
	b := make([]byte, 0, 128*len(v.Folders))
	for i := range v.Folders {
		f := &v.Folders[i]
		b = append(b, `<li class="d`...)
		b = strconv.AppendInt(b, int64(f.Depth), 10)
		if f.ID == v.Current {
			b = append(b, " cur"...)
		}
		b = append(b, `"><a href="/box/`...)
		b = strconv.AppendInt(b, f.ID, 10)
		b = append(b, `" data-box="`...)
		b = strconv.AppendInt(b, f.ID, 10)
		b = append(b, `">`...)
		b = escapeHTML(b, f.Label)
		if f.Unseen != 0 {
			b = append(b, ` <b class="count">`...)
			b = strconv.AppendInt(b, int64(f.Unseen), 10)
			b = append(b, "</b>"...)
		}
		b = append(b, "</a></li>\n"...)
	}
	return template.HTML(b)
}

// MoveHTML renders the "move or copy to folder" control.
func (v view) MoveHTML() template.HTML {
	b := make([]byte, 0, 64+64*len(v.Folders))
	b = append(b, `<select name="target" aria-label="Folder to move or copy to">`...)
	for i := range v.Folders {
		b = append(b, `<option value="`...)
		b = strconv.AppendInt(b, v.Folders[i].ID, 10)
		b = append(b, `">`...)
		b = escapeHTML(b, v.Folders[i].Name)
		b = append(b, "</option>"...)
	}
	b = append(b, `</select><button name="op" value="move">Move</button><button name="op" value="copy">Copy</button>`...)
	return template.HTML(b)
}
