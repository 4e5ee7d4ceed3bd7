package webmail

import (
	"net/http"
	"strconv"
	"strings"

	"pimail/internal/message"
)

// The full header and the source of a message, as plain text: every
// line shown through visibleLines and escaped by html/template, in a page
// of the webmail's own (never the message's bytes as a document).

// maxSourceShown bounds the source shown on the page; the rest is in the
// download.
const maxSourceShown = 1 << 20

// headerText is the message's header as text (the bytes before its body).
func headerText(l *loaded) string {
	end := min(max(int(l.meta.Parsed.Body.BodyStart), 0), len(l.raw))
	return visibleLines(string(l.raw[:end]))
}

type sourceData struct {
	view
	Box       folder
	UID       uint32
	Subject   string
	Source    string
	Truncated bool
	Size      string
}

// sourcePage shows a message's source.
func (s *Server) sourcePage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "Source")
	if !ok {
		return
	}
	l, ok := s.loadInViewOr404(w, r, &v)
	if !ok {
		return
	}
	if err := s.loadRaw(r.Context(), &l); err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The message could not be read.", err)
		return
	}
	box, _ := v.folderByID(l.box.ID)
	d := sourceData{view: v, Box: box, UID: l.meta.UID, Subject: message.Visible(l.meta.Parsed.Subject), Size: formatSize(int64(len(l.raw)))}
	raw := l.raw
	if len(raw) > maxSourceShown {
		raw, d.Truncated = raw[:maxSourceShown], true
	}
	d.Source = visibleLines(string(raw))
	d.Title, d.Current = "Source: "+d.Subject, box.ID
	s.page(w, r, "source", d)
}

// MsgURL is the message's page.
func (d sourceData) MsgURL() string {
	return "/msg/" + strconv.FormatInt(d.Box.ID, 10) + "/" + strconv.FormatUint(uint64(d.UID), 10)
}

// visibleLines shows text of many lines that came with a message: each
// line (CR LF or LF ended) through message.Visible, joined by LF.
func visibleLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = message.Visible(strings.TrimSuffix(l, "\r"))
	}
	return strings.Join(lines, "\n")
}
