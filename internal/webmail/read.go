package webmail

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"pimail/internal/message"
	"pimail/internal/store"
)

// loaded is one message with its raw bytes.
type loaded struct {
	box  store.Mailbox
	meta store.MessageMeta
	raw  []byte
}

// loadMessage reads a message of the session's account named by the URL's
// {box} and {uid}.
func (s *Server) loadMessage(ctx context.Context, sess *session, boxID, uidStr string) (loaded, error) {
	box, err := s.mailboxOf(ctx, sess.AccountID, boxID)
	if err != nil {
		return loaded{}, err
	}
	return s.loadIn(ctx, box, uidStr)
}

// loadIn reads message uidStr of a mailbox the caller has checked belongs
// to the session's account.
func (s *Server) loadIn(ctx context.Context, box store.Mailbox, uidStr string) (loaded, error) {
	l, err := s.loadMeta(ctx, box, uidStr)
	if err != nil {
		return l, err
	}
	return l, s.loadRaw(ctx, &l)
}

// loadMeta is loadIn without the message's bytes (loadRaw reads them). The
// index entry comes from the cache while the mailbox has not changed.
func (s *Server) loadMeta(ctx context.Context, box store.Mailbox, uidStr string) (loaded, error) {
	uid, err := strconv.ParseUint(uidStr, 10, 32)
	if err != nil || uid == 0 {
		return loaded{}, fmt.Errorf("uid %q: %w", uidStr, store.ErrNotFound)
	}
	key := msgKey{box: box.ID, uid: uint32(uid)}
	if e, ok := s.metas.get(key); ok && box.HighestModSeq != 0 && e.validity == box.UIDValidity && e.modseq == box.HighestModSeq {
		return loaded{box: box, meta: e.meta}, nil
	}
	metas, err := s.st.Fetch(ctx, box.ID, store.UIDSet{{Start: uint32(uid), Stop: uint32(uid)}}, store.FetchOptions{Parsed: true})
	if err != nil {
		return loaded{}, fmt.Errorf("fetch %d/%d: %w", box.ID, uid, err)
	}
	if len(metas) != 1 || metas[0].Parsed == nil || metas[0].Parsed.Body == nil {
		return loaded{}, fmt.Errorf("message %d/%d: %w", box.ID, uid, store.ErrNotFound)
	}
	if box.HighestModSeq != 0 {
		s.metas.put(key, metaEntry{validity: box.UIDValidity, modseq: box.HighestModSeq, meta: metas[0]}, 1)
	}
	return loaded{box: box, meta: metas[0]}, nil
}

// loadRaw reads the message's bytes into l.raw.
func (s *Server) loadRaw(ctx context.Context, l *loaded) error {
	if l.raw != nil {
		return nil
	}
	raw, err := s.st.ReadBlob(ctx, l.meta.BlobID)
	if err != nil {
		return fmt.Errorf("read message %d/%d: %w", l.box.ID, l.meta.UID, err)
	}
	l.raw = raw
	return nil
}

func (s *Server) loadOr404(w http.ResponseWriter, r *http.Request, sess *session) (loaded, bool) {
	l, err := s.loadMessage(r.Context(), sess, r.PathValue("box"), r.PathValue("uid"))
	return s.loadedOr404(w, r, l, err)
}

// loadInViewOr404 is loadOr404 for a page that has already listed the
// account's mailboxes in its view.
func (s *Server) loadInViewOr404(w http.ResponseWriter, r *http.Request, v *view) (loaded, bool) {
	id, _ := strconv.ParseInt(r.PathValue("box"), 10, 64)
	f, ok := v.folderByID(id)
	if !ok {
		s.httpError(w, r, http.StatusNotFound, "No such message.", nil)
		return loaded{}, false
	}
	l, err := s.loadMeta(r.Context(), f.mailbox(), r.PathValue("uid"))
	return s.loadedOr404(w, r, l, err)
}

func (s *Server) loadedOr404(w http.ResponseWriter, r *http.Request, l loaded, err error) (loaded, bool) {
	if errors.Is(err, store.ErrNotFound) {
		s.httpError(w, r, http.StatusNotFound, "No such message.", nil)
		return l, false
	}
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The message could not be read.", err)
		return l, false
	}
	return l, true
}

// authResult is the verdict of one mechanism in Authentication-Results.
type authResult struct{ Method, Result string }

var authResRE = regexp.MustCompile(`(?i)(?:^|;)\s*(dkim|spf|dmarc)\s*=\s*([a-z]+)`)

// authResults returns dkim/spf/dmarc verdicts from the topmost
// Authentication-Results field whose authserv-id is this server (RFC 8601
// §5: fields from other servers cannot be trusted).
func authResults(header []byte, hostname string) []authResult {
	for _, f := range message.HeaderFields(header) {
		if !strings.EqualFold(f.Name, "Authentication-Results") {
			continue
		}
		v := f.Unfolded()
		id, rest, _ := strings.Cut(v, ";")
		if fs := strings.Fields(id); len(fs) == 0 || !strings.EqualFold(fs[0], hostname) {
			continue
		}
		var out []authResult
		for _, m := range authResRE.FindAllStringSubmatch(";"+rest, 10) {
			out = append(out, authResult{Method: strings.ToLower(m[1]), Result: strings.ToLower(m[2])})
		}
		return out
	}
	return nil
}

// readData is the message page.
type readData struct {
	view
	Box         folder
	UID         uint32
	Subject     string
	From        string
	FromAddr    string
	To, Cc      string
	ReplyTo     string
	Date        string
	Text        []segment
	Body        template.HTML // the plain text rendered (else from Text)
	HasHTML     bool
	ShowHTML    bool
	FrameURL    string
	RemoteShown bool
	RemoteFound bool
	Attachments []attachment
	Auth        []authResult
	Junk        bool
	Flagged     bool
	Seen        bool
	Targets     []folder
	Next        string // where actions on the message return to
	AllHeaders  bool   // the full header is shown (?headers=1)
	HeaderText  string
}

func (s *Server) readPage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "")
	if !ok {
		return
	}
	if d, ok := s.readData(w, r, sess, v); ok {
		s.page(w, r, "read", d)
	}
}

// readData is what a message shows on its page and in the reading pane:
// the message named by the request's {box} and {uid}, which it marks
// seen. On failure it has answered.
func (s *Server) readData(w http.ResponseWriter, r *http.Request, sess *session, v view) (readData, bool) {
	l, ok := s.loadInViewOr404(w, r, &v)
	if !ok {
		return readData{}, false
	}
	p := l.meta.Parsed
	box, _ := v.folderByID(l.box.ID)
	// Everything that came with the message is shown through
	// message.Visible: no control or bidi character reaches the page.
	d := readData{view: v, Box: box, UID: l.meta.UID, Subject: message.Visible(p.Subject), From: message.Visible(p.From),
		To: message.Visible(p.To), Cc: message.Visible(p.Cc), Targets: v.Folders, Flagged: l.meta.Flags&store.FlagFlagged != 0}
	d.Title, d.Current = d.Subject, box.ID
	_, d.FromAddr = displayAddr(p.Envelope.From)
	if len(p.Envelope.ReplyTo) > 0 {
		d.ReplyTo = message.Visible(message.DecodeHeaderValue(joinAddrs(p.Envelope.ReplyTo)))
	}
	date := p.Date
	if date.IsZero() {
		date = l.meta.InternalDate
	}
	d.Date = date.Local().Format("Mon, 2 Jan 2006 15:04")
	d.Junk = hasKeyword(l.meta.Keywords, "$Junk") || box.Special == store.SpecialJunk

	bv, err := s.bodyView(r, &l, r.URL.Query().Get("view") != "text")
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The message could not be read.", err)
		return readData{}, false
	}
	d.Auth, d.Attachments = bv.auth, bv.layout.attachments
	d.HasHTML = bv.layout.hasHTML()
	d.ShowHTML = bv.showHTML(r.URL.Query().Get("view") != "text")
	if d.ShowHTML {
		pr, err := s.prefs.get(r.Context(), sess.AccountID)
		if err != nil {
			s.logError(r, "read prefs", "err", err)
		}
		d.RemoteShown = r.URL.Query().Get("remote") == "1" || pr.allowsRemote(d.FromAddr)
		d.RemoteFound = bv.remoteFound
		d.FrameURL = fmt.Sprintf("/msg/%d/%d/body", box.ID, l.meta.UID)
		if d.RemoteShown {
			d.FrameURL += "?remote=1"
		}
	} else {
		d.Body = bv.text
	}
	if l.meta.Flags&store.FlagSeen == 0 {
		if _, err := s.st.StoreFlags(r.Context(), l.box.ID, store.UIDSet{{Start: l.meta.UID, Stop: l.meta.UID}},
			store.FlagsAdd, store.FlagSeen, nil); err != nil {
			s.logError(r, "mark seen", "err", err)
		}
	}
	if r.URL.Query().Get("headers") == "1" {
		if err := s.loadRaw(r.Context(), &l); err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The message could not be read.", err)
			return readData{}, false
		}
		d.AllHeaders, d.HeaderText = true, headerText(&l)
	}
	d.Seen = true
	d.Next = fmt.Sprintf("/msg/%d/%d", box.ID, l.meta.UID)
	return d, true
}

// bodyView returns what the read page shows of the message's content,
// from the cache (by blob) or by reading and decoding the message. With
// preferHTML the HTML body's remote-content check is made, else the plain
// text is rendered (when the message has those parts).
func (s *Server) bodyView(r *http.Request, l *loaded, preferHTML bool) (*bodyView, error) {
	bv, ok := s.bodies.get(l.meta.BlobID)
	if ok && bv.ready(preferHTML) {
		return bv, nil
	}
	if err := s.loadRaw(r.Context(), l); err != nil {
		return nil, err
	}
	p := l.meta.Parsed
	if ok {
		c := *bv
		bv = &c
	} else {
		bv = &bodyView{layout: messageLayout(p.Body)}
		bv.auth = authResults(l.raw[:min(int(p.Body.BodyStart), len(l.raw))], s.cfg.Hostname)
	}
	showHTML := bv.showHTML(preferHTML)
	if showHTML && !bv.remoteDone {
		for _, b := range bv.layout.blocks {
			if b.html < 0 {
				continue
			}
			if body, err := message.DecodeText(l.raw, partAt(p.Body, b.html)); err == nil && hasRemoteContent(body) {
				bv.remoteFound = true
				break
			}
		}
		bv.remoteDone = true
	}
	if !showHTML && !bv.textDone {
		bv.text = readData{Text: linkify(blockText(l.raw, p.Body, bv.layout))}.TextHTML()
		bv.textDone = true
	}
	s.bodies.put(l.meta.BlobID, bv, bv.cost())
	return bv, nil
}

func joinAddrs(list []message.Address) string {
	var parts []string
	for _, a := range list {
		if a.Group != "" || a.End {
			continue
		}
		if a.Name != "" {
			parts = append(parts, a.Name+" <"+a.Addr()+">")
		} else {
			parts = append(parts, a.Addr())
		}
	}
	return strings.Join(parts, ", ")
}

// bodyCSP is the policy of a sanitised HTML body: nothing runs, nothing
// loads except data: images (and remote images when allowed), and the
// document is sandboxed even when opened on its own.
func bodyCSP(remote bool) string {
	img := "data:"
	if remote {
		img = "data: https: http:"
	}
	return "default-src 'none'; img-src " + img + "; style-src 'unsafe-inline'; font-src 'none'; " +
		"form-action 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox allow-popups allow-popups-to-escape-sandbox"
}

const maxInlineImage = 2 << 20

// bodyFrame serves the sanitised HTML body for the read page's iframe.
func (s *Server) bodyFrame(w http.ResponseWriter, r *http.Request, sess *session) {
	box, err := s.mailboxOf(r.Context(), sess.AccountID, r.PathValue("box"))
	if err != nil {
		s.httpError(w, r, http.StatusNotFound, "No such message.", nil)
		return
	}
	l, err := s.loadMeta(r.Context(), box, r.PathValue("uid"))
	if _, ok := s.loadedOr404(w, r, l, err); !ok {
		return
	}
	p := l.meta.Parsed
	lay := messageLayout(p.Body)
	if !lay.hasHTML() {
		s.httpError(w, r, http.StatusNotFound, "This message has no HTML body.", nil)
		return
	}
	_, from := displayAddr(p.Envelope.From)
	remote := r.URL.Query().Get("remote") == "1"
	if !remote {
		pr, err := s.prefs.get(r.Context(), sess.AccountID)
		if err != nil {
			s.logError(r, "read prefs", "err", err)
		}
		remote = pr.allowsRemote(from)
	}
	key := htmlKey{blob: l.meta.BlobID, part: "all", remote: remote}
	out, ok := s.sanitize.cache.get(key)
	if !ok {
		if err := s.loadRaw(r.Context(), &l); err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The message could not be read.", err)
			return
		}
		// Every block in order: the HTML form sanitized, a text-only
		// block as preformatted text.
		var b strings.Builder
		images := inlineImages(l.raw, p.Body)
		for i, bl := range lay.blocks {
			if i > 0 {
				b.WriteString("<hr>")
			}
			if bl.html >= 0 {
				if body, err := message.DecodeText(l.raw, partAt(p.Body, bl.html)); err == nil {
					b.WriteString(s.sanitize.sanitize(body, remote, images))
				}
				continue
			}
			if text, err := message.DecodeText(l.raw, partAt(p.Body, bl.plain)); err == nil {
				b.WriteString("<pre>")
				b.WriteString(html.EscapeString(text))
				b.WriteString("</pre>")
			}
		}
		out = wrapBody(b.String())
		s.sanitize.cache.put(key, out)
	}
	h := w.Header()
	h.Set("Content-Security-Policy", bodyCSP(remote))
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(out))
}

func wrapBody(safe string) string {
	return `<!doctype html><html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">` +
		`<style>body{font:15px/1.45 system-ui,sans-serif;margin:8px;color:#111;background:#fff;overflow-wrap:anywhere}img{max-width:100%;height:auto}pre{white-space:pre-wrap}</style>` +
		`</head><body>` + safe + `</body></html>`
}

// inlineImages maps Content-IDs of small raster image parts to data: URIs,
// so cid: references work without any request leaving the iframe.
func inlineImages(raw []byte, root *message.Part) map[string]string {
	var m map[string]string
	total := 0
	root.Walk(func(p *message.Part) bool {
		if p.Type != "image" || p.ID == "" || p.Size > maxInlineImage || total > 4*maxInlineImage {
			return true
		}
		switch p.Subtype {
		case "png", "gif", "jpeg", "webp":
		default:
			return true
		}
		if p.BodyStart < 0 || p.End > int64(len(raw)) || p.BodyStart > p.End {
			return true
		}
		data := message.DecodeTransfer(raw[p.BodyStart:p.End], p.Encoding)
		total += len(data)
		if m == nil {
			m = map[string]string{}
		}
		m[strings.Trim(p.ID, "<> ")] = "data:image/" + p.Subtype + ";base64," + base64.StdEncoding.EncodeToString(data)
		return true
	})
	return m
}

// allowRemote remembers the sender of a message as one whose remote
// content is always loaded.
func (s *Server) allowRemote(w http.ResponseWriter, r *http.Request, sess *session) {
	l, ok := s.loadOr404(w, r, sess)
	if !ok {
		return
	}
	_, from := displayAddr(l.meta.Parsed.Envelope.From)
	if from != "" {
		if err := s.prefs.update(r.Context(), sess.AccountID, func(p *prefs) { p.addRemoteSender(from) }); err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The setting could not be saved.", err)
			return
		}
	}
	http.Redirect(w, r, fmt.Sprintf("/msg/%d/%d", l.box.ID, l.meta.UID), http.StatusSeeOther)
}
