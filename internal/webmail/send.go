package webmail

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"path"
	"slices"
	"strconv"
	"strings"

	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/message"
	"pimail/internal/store"
	"pimail/internal/websession"
)

func unescapeEntities(s string) string { return html.UnescapeString(s) }

// errUser is an error whose text is meant for the user.
type errUser struct{ msg string }

func (e errUser) Error() string { return e.msg }

// composeSubmit sends the message (action=send) or saves it to Drafts.
func (s *Server) composeSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	o, src, err := s.buildOutgoing(ctx, r, sess)
	var ue errUser
	if errors.As(err, &ue) {
		s.redisplay(w, r, sess, http.StatusBadRequest, ue.msg)
		return
	}
	if err != nil {
		s.logError(r, "compose", "err", err)
		s.redisplay(w, r, sess, http.StatusInternalServerError, "The message could not be prepared.")
		return
	}
	draftUID, _ := strconv.ParseUint(r.PostFormValue("draft_uid"), 10, 32)
	if r.PostFormValue("action") == "save" {
		drafts, err := s.specialMailbox(ctx, sess.AccountID, store.SpecialDrafts)
		if err == nil {
			var d store.Delivered
			d, err = s.st.Append(ctx, drafts.ID, o.bytes(true), store.FlagDraft|store.FlagSeen, nil, s.now())
			if err == nil {
				s.removeDraft(ctx, drafts, uint32(draftUID))
				http.Redirect(w, r, fmt.Sprintf("/compose?mode=draft&box=%d&uid=%d&notice=saved", drafts.ID, d.UID), http.StatusSeeOther)
				return
			}
		}
		s.logError(r, "save draft", "err", err)
		s.redisplay(w, r, sess, http.StatusInternalServerError, "The draft could not be saved.")
		return
	}
	if err := s.send(ctx, r, sess, o); err != nil {
		if errors.As(err, &ue) {
			s.redisplay(w, r, sess, http.StatusBadRequest, ue.msg)
			return
		}
		s.logError(r, "send", "user", sess.Address, "err", err)
		s.redisplay(w, r, sess, http.StatusInternalServerError, "The message could not be sent. Please try again.")
		return
	}
	// After sending: mark the original answered or forwarded, drop the draft.
	if src.ID != 0 {
		srcUID, _ := strconv.ParseUint(r.PostFormValue("src_uid"), 10, 32)
		set := store.UIDSet{{Start: uint32(srcUID), Stop: uint32(srcUID)}}
		switch r.PostFormValue("mode") {
		case "reply", "all":
			_, err = s.st.StoreFlags(ctx, src.ID, set, store.FlagsAdd, store.FlagAnswered, nil)
		case "forward":
			_, err = s.st.StoreFlags(ctx, src.ID, set, store.FlagsAdd, 0, []string{"$Forwarded"})
		}
		if err != nil {
			s.log.Warn("flag original after send", "err", err)
		}
	}
	if draftUID != 0 {
		if drafts, err := s.specialMailbox(ctx, sess.AccountID, store.SpecialDrafts); err == nil {
			s.removeDraft(ctx, drafts, uint32(draftUID))
		}
	}
	// Back to the folder of the message answered (or the inbox), saying
	// that it went.
	back := src
	if back.ID == 0 {
		if back, err = s.specialMailbox(ctx, sess.AccountID, store.SpecialNone); err != nil {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
	}
	http.Redirect(w, r, "/box/"+strconv.FormatInt(back.ID, 10)+"?notice=sent", http.StatusSeeOther)
}

func (s *Server) removeDraft(ctx context.Context, drafts store.Mailbox, uid uint32) {
	if uid == 0 {
		return
	}
	set := store.UIDSet{{Start: uid, Stop: uid}}
	if _, err := s.st.StoreFlags(ctx, drafts.ID, set, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		s.log.Warn("remove old draft", "err", err)
		return
	}
	if _, err := s.st.Expunge(ctx, drafts.ID, set); err != nil {
		s.log.Warn("remove old draft", "err", err)
	}
}

// buildOutgoing checks the form and assembles the message. It returns the
// source mailbox for replies and forwards (zero when none).
func (s *Server) buildOutgoing(ctx context.Context, r *http.Request, sess *session) (*outgoing, store.Mailbox, error) {
	f := r.PostFormValue
	from, err := s.sender(ctx, sess, f("from"))
	if err != nil {
		return nil, store.Mailbox{}, err
	}
	o := &outgoing{
		From:       from,
		Subject:    f("subject"),
		Body:       f("body"),
		InReplyTo:  f("in_reply_to"),
		References: cleanMsgIDs(f("references")),
		Date:       s.now(),
		MessageID:  newMessageID(s.cfg.Hostname),
	}
	if len(o.Subject) > 998 {
		return nil, store.Mailbox{}, errUser{"The subject is too long."}
	}
	if f("format") == "html" {
		if len(f("html")) > maxHTMLBody {
			return nil, store.Mailbox{}, errUser{"The message is too long."}
		}
		o.HTML = sanitizeCompose(f("html"))
		o.Body = htmlToText(o.HTML)
	}
	for _, fld := range []struct {
		name string
		dst  *[]*mail.Address
	}{{"to", &o.To}, {"cc", &o.Cc}, {"bcc", &o.Bcc}} {
		list, err := parseRecipients(f(fld.name))
		if err != nil {
			return nil, store.Mailbox{}, errUser{fmt.Sprintf("%s: %v", strings.ToUpper(fld.name[:1])+fld.name[1:], err)}
		}
		*fld.dst = list
	}
	if len(o.To)+len(o.Cc)+len(o.Bcc) > maxRecipients {
		return nil, store.Mailbox{}, errUser{fmt.Sprintf("At most %d recipients, please.", maxRecipients)}
	}
	var total int64
	var src store.Mailbox
	if keep := r.PostForm["keep"]; len(keep) > 0 {
		l, err := s.loadMessage(ctx, sess, f("src_box"), f("src_uid"))
		if err != nil {
			return nil, store.Mailbox{}, errUser{"The original message is gone; its attachments cannot be included."}
		}
		src = l.box
		for _, k := range keep {
			n, err := strconv.Atoi(k)
			p := partAt(l.meta.Parsed.Body, n)
			if err != nil || p == nil || p.Type == "multipart" || p.End > int64(len(l.raw)) || p.BodyStart > p.End {
				continue
			}
			data := message.DecodeTransfer(l.raw[p.BodyStart:p.End], p.Encoding)
			total += int64(len(data))
			o.Attachments = append(o.Attachments, outPart{Name: safeFilename(p.Filename(), p), Type: p.MIMEType(), Data: data})
		}
	} else if f("src_box") != "" {
		if b, err := s.mailboxOf(ctx, sess.AccountID, f("src_box")); err == nil {
			src = b
		}
	}
	if r.MultipartForm != nil {
		for _, fh := range r.MultipartForm.File["files"] {
			if len(o.Attachments) >= 100 {
				return nil, store.Mailbox{}, errUser{"At most 100 attachments, please."}
			}
			total += fh.Size
			if total > s.cfg.MaxUploadSize {
				return nil, store.Mailbox{}, errUser{"The attachments are larger than " + formatSize(s.cfg.MaxUploadSize) + "."}
			}
			file, err := fh.Open()
			if err != nil {
				return nil, store.Mailbox{}, fmt.Errorf("open upload: %w", err)
			}
			data, err := io.ReadAll(io.LimitReader(file, s.cfg.MaxUploadSize+1))
			file.Close()
			if err != nil {
				return nil, store.Mailbox{}, fmt.Errorf("read upload: %w", err)
			}
			name := safeFilename(fh.Filename, nil)
			o.Attachments = append(o.Attachments, outPart{Name: name, Type: uploadType(fh.Header.Get("Content-Type"), name), Data: data})
		}
	}
	return o, src, nil
}

// sender is the From of a message the account sends: the identity with
// address from ("" for the account's own), while the account may still
// send as it (an alias can be removed after its identity was made).
func (s *Server) sender(ctx context.Context, sess *session, from string) (mail.Address, error) {
	ids, err := s.identities(ctx, sess)
	if err != nil {
		return mail.Address{}, err
	}
	if from == "" {
		from = sess.Address
	}
	i := slices.IndexFunc(ids, func(id store.Identity) bool { return strings.EqualFold(id.Address, from) })
	if i < 0 {
		return mail.Address{}, errUser{"You have no identity " + from + "."}
	}
	aliases, err := s.aliases(ctx)
	if err != nil {
		return mail.Address{}, err
	}
	if !directory.SendsAs(sess.Address, ids[i].Address, aliases) {
		return mail.Address{}, errUser{"You cannot send as " + ids[i].Address + " any more."}
	}
	return mail.Address{Name: ids[i].Name, Address: ids[i].Address}, nil
}

// uploadType validates the browser's media type for an upload, falling
// back to the file extension and then to application/octet-stream.
func uploadType(declared, name string) string {
	if t, _, err := mime.ParseMediaType(declared); err == nil && strings.Count(t, "/") == 1 && isPrintableASCII(t) {
		return t
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		if mt, _, err := mime.ParseMediaType(t); err == nil {
			return mt
		}
	}
	return "application/octet-stream"
}

// send delivers o to its local recipients through the delivery pipeline,
// queues it for recipients in other domains (Config.Outbound) and files one
// copy in Sent. The message carries Date, Message-ID and From: the
// account's own address (buildOutgoing), like mail from submission.
func (s *Server) send(ctx context.Context, r *http.Request, sess *session, o *outgoing) error {
	var rcpts []string
	seen := map[string]bool{}
	for _, list := range [][]*mail.Address{o.To, o.Cc, o.Bcc} {
		for _, a := range list {
			k := strings.ToLower(a.Address)
			if !seen[k] {
				seen[k] = true
				rcpts = append(rcpts, a.Address)
			}
		}
	}
	if len(rcpts) == 0 {
		return errUser{"Please add at least one recipient."}
	}
	if s.pipe == nil {
		return errUser{"Sending is not configured on this server."}
	}
	local, remote, err := s.splitRecipients(ctx, rcpts)
	if err != nil {
		return err
	}
	o.Received = fmt.Sprintf("from [%s] by %s (pimail webmail) with HTTP; authenticated as %s; %s",
		websession.ClientIP(r), s.cfg.Hostname, sess.Address, o.Date.Format("Mon, 2 Jan 2006 15:04:05 -0700"))
	raw := o.bytes(false)
	if len(remote) > 0 {
		qid, err := s.cfg.Outbound.Enqueue(ctx, sess.AccountID, o.From.Address, remote, raw)
		if err != nil {
			return fmt.Errorf("queue: %w", err)
		}
		s.log.Info("webmail queued", "user", sess.Address, "queue_id", qid, "rcpts", len(remote))
	}
	if len(local) > 0 {
		env := delivery.Envelope{MailFrom: o.From.Address, Recipients: local, RemoteIP: websession.ClientIP(r), Helo: "webmail", TLS: r.TLS != nil, Authenticated: true}
		if _, err := s.pipe.Deliver(ctx, env, raw); err != nil {
			switch {
			case errors.Is(err, delivery.ErrNoRecipients) && len(remote) == 0:
				return errUser{"None of the recipients exists here."}
			case errors.Is(err, delivery.ErrForwardingUnavailable) && len(remote) == 0:
				return errUser{"The recipients forward to other domains, and forwarding is not configured on this server."}
			case errors.Is(err, delivery.ErrNoRecipients), errors.Is(err, delivery.ErrForwardingUnavailable):
				// The remote copies are queued; the local ones vanished
				// since the check. Keep the Sent copy of what went out.
				s.log.Warn("webmail local delivery", "user", sess.Address, "err", err)
			default:
				return fmt.Errorf("deliver: %w", err)
			}
		}
	}
	sent, err := s.specialMailbox(ctx, sess.AccountID, store.SpecialSent)
	if err != nil {
		return fmt.Errorf("sent copy: %w", err)
	}
	o.Received = ""
	if _, err := s.st.Append(ctx, sent.ID, o.bytes(true), store.FlagSeen, nil, o.Date); err != nil {
		return fmt.Errorf("sent copy: %w", err)
	}
	s.log.Info("webmail sent", "user", sess.Address, "local", len(local), "remote", len(remote), "msgid", o.MessageID)
	return nil
}

// splitRecipients sorts recipients into those in this server's domains
// (which must exist) and those elsewhere (which need Config.Outbound).
// Addresses another server could read two ways (%-hack, bang paths) are
// refused, as in submission.
func (s *Server) splitRecipients(ctx context.Context, rcpts []string) (local, remote []string, err error) {
	dir, err := s.st.Directory(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("directory: %w", err)
	}
	domains := map[string]bool{}
	for _, d := range dir.Domains {
		domains[d.Name] = true
	}
	known := map[string]bool{}
	for _, a := range dir.Accounts {
		if !a.Disabled {
			known[a.Address] = true
		}
	}
	for _, a := range dir.Aliases {
		known[strings.ToLower(a.Address)] = true
	}
	var unknown, bad []string
	for _, rc := range rcpts {
		addr := strings.ToLower(rc)
		at := strings.LastIndexByte(addr, '@')
		if at <= 0 || strings.Count(addr, "@") != 1 || strings.ContainsAny(addr, " \t\"\\<>()[],;:%!") {
			bad = append(bad, rc)
			continue
		}
		lp, domain := addr[:at], addr[at+1:]
		if !domains[domain] {
			remote = append(remote, rc)
			continue
		}
		base := lp
		if i := strings.IndexByte(lp, '+'); i > 0 {
			base = lp[:i]
		}
		if !known[addr] && !known[base+"@"+domain] && !known["@"+domain] {
			unknown = append(unknown, rc)
			continue
		}
		local = append(local, rc)
	}
	switch {
	case len(bad) > 0:
		return nil, nil, errUser{"These addresses cannot be used: " + strings.Join(bad, ", ")}
	case len(unknown) > 0:
		return nil, nil, errUser{"No such recipient here: " + strings.Join(unknown, ", ")}
	case len(remote) > 0 && s.cfg.Outbound == nil:
		return nil, nil, errUser{"Sending to other domains is not available on this server: " + strings.Join(remote, ", ")}
	}
	return local, remote, nil
}
