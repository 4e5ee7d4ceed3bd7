package webmail

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"

	"github.com/microcosm-cc/bluemonday"

	"pimail/internal/message"
	"pimail/internal/store"
)

// composeData is the compose form.
type composeData struct {
	view
	To, Cc, Bcc string
	Subject     string
	Body        string
	InReplyTo   string
	References  string
	Mode        string // "", reply, all, forward, draft
	SrcBox      int64
	SrcUID      uint32
	Keep        []attachment // attachments carried over from the source message
	DraftUID    uint32       // the draft being edited, in Drafts
	MaxUpload   string
	Identities  []identityOption // the From menu
	HTML        bool             // the formatting editor is on
	HTMLBody    template.HTML    // its content (escaped text, or sanitized HTML)
}

// formAddr renders an address for a form field: decoded display name,
// quoted when it holds characters that would split the list.
func formAddr(a message.Address) string {
	name := message.Visible(cleanHeaderText(message.DecodeHeaderValue(a.Name)))
	if name == "" {
		return a.Addr()
	}
	if strings.ContainsAny(name, `,;<>@:"()[]\`) {
		name = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
	}
	return name + " <" + a.Addr() + ">"
}

func formAddrs(list []message.Address, skip map[string]bool) []string {
	var out []string
	for _, a := range list {
		if a.Group != "" || a.End || a.Mailbox == "" {
			continue
		}
		k := strings.ToLower(a.Addr())
		if skip[k] {
			continue
		}
		skip[k] = true
		out = append(out, formAddr(a))
	}
	return out
}

func prefixSubject(prefix, subj string) string {
	if strings.HasPrefix(strings.ToLower(subj), strings.ToLower(prefix)) {
		return subj
	}
	return prefix + " " + subj
}

var textPolicy = bluemonday.StrictPolicy()

// messageText returns the message's body as plain text: every displayed
// block, in its plain form or its HTML form with the tags removed.
func messageText(raw []byte, root *message.Part) string {
	return blockText(raw, root, messageLayout(root))
}

func htmlToText(h string) string {
	r := strings.NewReplacer("<br>", "\n", "<br/>", "\n", "<br />", "\n", "</p>", "\n\n", "</div>", "\n", "</tr>", "\n", "</li>", "\n")
	t := textPolicy.Sanitize(r.Replace(h))
	return unescapeEntities(t)
}

func quote(text string) string {
	var b strings.Builder
	for line := range strings.Lines(strings.TrimRight(strings.ReplaceAll(text, "\r\n", "\n"), "\n")) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, ">") {
			b.WriteString(">" + line + "\n")
		} else {
			b.WriteString("> " + line + "\n")
		}
	}
	return b.String()
}

func (s *Server) composePage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "Compose")
	if !ok {
		return
	}
	q := r.URL.Query()
	d := composeData{view: v, Mode: q.Get("mode"), MaxUpload: formatSize(s.cfg.MaxUploadSize)}
	if to := q.Get("to"); to != "" {
		d.To = cleanHeaderText(to)
	}
	pr, err := s.prefs.get(r.Context(), sess.AccountID)
	if err != nil {
		s.logError(r, "read prefs", "err", err)
	}
	ids, err := s.identities(r.Context(), sess)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The identities could not be read.", err)
		return
	}
	var l loaded
	chosen := 0
	if d.Mode != "" {
		if l, err = s.loadMessage(r.Context(), sess, q.Get("box"), q.Get("uid")); err != nil {
			s.httpError(w, r, http.StatusNotFound, "No such message.", nil)
			return
		}
		env := &l.meta.Parsed.Envelope
		if d.Mode == "draft" {
			chosen = sendersFor(ids, &message.Envelope{To: env.From})
		} else {
			chosen = sendersFor(ids, env)
		}
	}
	sig := ""
	if b := signatureBlock(ids[chosen].Signature); b != "" {
		sig = "\n\n" + b
	}
	d.Body = sig
	d.HTML = pr.ComposeHTML
	if d.Mode != "" {
		s.prefill(&d, l, ids, sig)
	}
	d.Identities = identityOptions(ids, ids[chosen].Address)
	if d.HTMLBody == "" {
		d.HTMLBody = textToHTML(d.Body)
	}
	if n := q.Get("notice"); n == "saved" {
		d.Notice = "Draft saved."
	}
	s.page(w, r, "compose", d)
}

// identityOptions makes the From menu with from chosen.
func identityOptions(ids []store.Identity, from string) []identityOption {
	out := make([]identityOption, len(ids))
	for i, id := range ids {
		out[i] = identityOption{Identity: id, Selected: strings.EqualFold(id.Address, from)}
	}
	return out
}

// prefill fills the form for a reply, reply-all, forward or draft of l.
func (s *Server) prefill(d *composeData, l loaded, ids []store.Identity, sig string) {
	p := l.meta.Parsed
	env := p.Envelope
	d.SrcBox, d.SrcUID = l.box.ID, l.meta.UID
	text := messageText(l.raw, p.Body)
	_, fromAddr := displayAddr(env.From)
	// What came with the message is prefilled through message.Visible.
	fromLabel, subject, to, cc := message.Visible(p.From), message.Visible(p.Subject), message.Visible(p.To), message.Visible(p.Cc)
	date := p.Date
	if date.IsZero() {
		date = l.meta.InternalDate
	}
	refs := func() {
		var ids []string
		for _, id := range p.References {
			ids = append(ids, "<"+id+">")
		}
		if env.MessageID != "" {
			ids = append(ids, env.MessageID)
			d.InReplyTo = env.MessageID
		}
		if len(ids) > 20 { // keep the first and the most recent (RFC 5322 §3.6.4)
			ids = append(ids[:1], ids[len(ids)-19:]...)
		}
		d.References = strings.Join(ids, " ")
	}
	switch d.Mode {
	case "reply", "all":
		self := map[string]bool{}
		for _, id := range ids {
			self[strings.ToLower(id.Address)] = true
		}
		replyTo := env.ReplyTo
		if len(replyTo) == 0 {
			replyTo = env.From
		}
		// Replying to one's own sent message goes to its recipients.
		if self[strings.ToLower(fromAddr)] && len(env.ReplyTo) == 0 {
			replyTo = env.To
		}
		d.To = strings.Join(formAddrs(replyTo, self), ", ")
		if d.Mode == "all" {
			rest := append(append([]message.Address{}, env.To...), env.Cc...)
			d.Cc = strings.Join(formAddrs(rest, self), ", ")
		}
		d.Subject = prefixSubject("Re:", subject)
		d.Body = "\n" + sig + "\n\nOn " + date.Local().Format("Mon, 2 Jan 2006 15:04") + ", " + fromLabel + " wrote:\n" + quote(text)
		refs()
	case "forward":
		d.Subject = prefixSubject("Fwd:", subject)
		var b strings.Builder
		b.WriteString("\n" + sig + "\n\n---------- Forwarded message ----------\n")
		fmt.Fprintf(&b, "From: %s\nDate: %s\nSubject: %s\nTo: %s\n", fromLabel, date.Local().Format("Mon, 2 Jan 2006 15:04"), subject, to)
		if cc != "" {
			fmt.Fprintf(&b, "Cc: %s\n", cc)
		}
		b.WriteString("\n" + text)
		d.Body = b.String()
		d.Keep = attachments(p.Body)
		refs()
		d.InReplyTo = ""
	case "draft":
		skip := map[string]bool{}
		d.To = strings.Join(formAddrs(env.To, skip), ", ")
		d.Cc = strings.Join(formAddrs(env.Cc, skip), ", ")
		d.Bcc = strings.Join(formAddrs(env.Bcc, skip), ", ")
		d.Subject = subject
		d.Body = text
		if h := htmlBodyOf(l.raw, p.Body); h != "" {
			d.HTML, d.HTMLBody = true, template.HTML(sanitizeCompose(h))
		}
		d.Keep = attachments(p.Body)
		d.InReplyTo = env.InReplyTo
		var ids []string
		for _, id := range p.References {
			ids = append(ids, "<"+id+">")
		}
		d.References = strings.Join(ids, " ")
		if l.box.SpecialUse == store.SpecialDrafts {
			d.DraftUID = l.meta.UID
		}
	}
}

// redisplay shows the form again with the submitted values and an error.
func (s *Server) redisplay(w http.ResponseWriter, r *http.Request, sess *session, code int, msg string) {
	v, ok := s.newView(w, r, sess, "Compose")
	if !ok {
		return
	}
	f := r.PostFormValue
	d := composeData{view: v, To: f("to"), Cc: f("cc"), Bcc: f("bcc"), Subject: f("subject"), Body: f("body"),
		InReplyTo: f("in_reply_to"), References: f("references"), Mode: f("mode"), MaxUpload: formatSize(s.cfg.MaxUploadSize),
		HTML: f("format") == "html"}
	if d.HTML {
		d.HTMLBody = template.HTML(sanitizeCompose(f("html")))
	} else {
		d.HTMLBody = textToHTML(d.Body)
	}
	if ids, err := s.identities(r.Context(), sess); err == nil {
		d.Identities = identityOptions(ids, f("from"))
	}
	d.SrcBox, _ = strconv.ParseInt(f("src_box"), 10, 64)
	if u, err := strconv.ParseUint(f("src_uid"), 10, 32); err == nil {
		d.SrcUID = uint32(u)
	}
	if u, err := strconv.ParseUint(f("draft_uid"), 10, 32); err == nil {
		d.DraftUID = uint32(u)
	}
	if d.SrcUID != 0 {
		if l, err := s.loadMessage(r.Context(), sess, f("src_box"), f("src_uid")); err == nil {
			keep := map[string]bool{}
			for _, k := range r.PostForm["keep"] {
				keep[k] = true
			}
			for _, a := range attachments(l.meta.Parsed.Body) {
				if keep[strconv.Itoa(a.Index)] {
					d.Keep = append(d.Keep, a)
				}
			}
		}
	}
	if r.MultipartForm != nil && len(r.MultipartForm.File["files"]) > 0 {
		msg += " Please attach your files again."
	}
	d.Error = msg
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.tmpl.render(w, "compose", d); err != nil {
		s.logError(r, "render compose", "err", err)
	}
}
