package smtpserver

import (
	"context"
	"errors"
	"strings"
	"time"

	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

// submissionRole is message submission (RFC 6409): logged-in users only,
// sending as themselves.
type submissionRole struct{ srv *Server }

var (
	replyAuthRequired = newReply(530, [3]int{5, 7, 0}, "Authentication required")
	replyNotYours     = newReply(550, [3]int{5, 7, 1}, "Sender address not owned by the authenticated user")
	replyFromNotYours = newReply(550, [3]int{5, 7, 1}, "From: header address not owned by the authenticated user")
	replyBadHeader    = newReply(550, [3]int{5, 6, 0}, "Message header without a valid From: field")
)

func (r submissionRole) greet(s *session) bool {
	s.c.raw("220 " + r.srv.cfg.Hostname + " ESMTP pimail submission\r\n")
	return true
}

// mail checks that the sender is the logged-in user's (RFC 6409 §4.3:
// the MSA must authenticate; §8.1 lets it refuse a sender the user may not
// use). The null sender is not for people.
func (r submissionRole) mail(s *session, from string, _ mailParams) *reply {
	if s.acct == nil {
		return replyAuthRequired
	}
	if from == "" || !r.owns(s, from) {
		r.srv.log.Warn("sender refused", "ip", s.ip, "user", s.acct.Address, "from", from)
		return replyNotYours
	}
	return nil
}

// owns reports whether the account may use addr: its own address (also
// with a +detail), or an alias whose targets include it. A catch-all does
// not count: it receives for the domain, it does not send as it.
func (r submissionRole) owns(s *session, addr string) bool {
	a := strings.ToLower(strings.TrimSpace(addr))
	if strings.Count(a, "@") != 1 {
		return false
	}
	own := strings.ToLower(s.acct.Address)
	if a == own {
		return true
	}
	local, domain, _ := strings.Cut(a, "@")
	base := a
	if i := strings.IndexByte(local, '+'); i > 0 {
		base = local[:i] + "@" + domain
		if base == own {
			return true
		}
	}
	ctx, cancel := context.WithTimeout(r.srv.ctx, 10*time.Second)
	defer cancel()
	aliases, err := r.srv.deps.Mailboxes.Aliases(ctx)
	if err != nil {
		r.srv.log.Error("reading aliases", "err", err)
		return false
	}
	for _, al := range aliases {
		if strings.ToLower(al.Address) != a && strings.ToLower(al.Address) != base {
			continue
		}
		for _, t := range al.Targets {
			if strings.ToLower(t) == own {
				return true
			}
		}
	}
	return false
}

// rcpt sorts a recipient into local and remote. Only a logged-in session
// gets here with a sender, so relaying to remote domains is for users only
// (never an open relay). Addresses that another server could read two ways
// (an "@" in the local part, "%" or "!" routing) are refused.
func (r submissionRole) rcpt(s *session, to string) *reply {
	if s.acct == nil {
		return replyAuthRequired
	}
	local, domain, _ := strings.Cut(to, "@")
	// The %-hack and UUCP bang paths are routing requests that some
	// servers still honour; nobody's real address needs them.
	if strings.Count(to, "@") != 1 || local == "" || !validDomain([]byte(domain)) || strings.ContainsAny(to, " \t\"\\<>()[],;:%!") {
		r.srv.log.Info("recipient refused: ambiguous address", "ip", s.ip, "rcpt", to)
		return replyBadAddress
	}
	_, err := r.srv.deps.Dir.Resolve(to)
	switch {
	case errors.Is(err, directory.ErrNotLocalDomain):
		s.remote = append(s.remote, to)
		return nil
	case errors.Is(err, directory.ErrUnknownUser):
		return replyNoSuchUser
	case err != nil:
		r.srv.log.Warn("recipient check failed", "rcpt", to, "err", err)
		return replyTempFailure
	}
	// A full mailbox is refused here, as on the MX, for this recipient
	// only (RFC 5321 §3.3). After DATA it would refuse the whole message
	// when its remote copies are already queued: the client would send
	// again and the remote recipients get it twice.
	if err := r.srv.deps.Pipeline.CheckQuota(r.srv.ctx, to, s.params.size); err != nil {
		return deliveryError(err)
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

// dataPrefix: nothing; the Received field goes on top once the header is
// complete (deliver).
func (submissionRole) dataPrefix(*session, string) string { return "" }

// deliver checks the message's From:, completes its header and sends it:
// remote recipients into the queue, a copy to Sent, local recipients
// through the pipeline (last, because the pipeline changes the header in
// place). 250 only once all of it is on disk.
func (r submissionRole) deliver(s *session, id string, sp *spool, fr *framer) *reply {
	m, release, err := sp.message(fr)
	if err != nil {
		r.srv.log.Warn("spooled message unreadable", "id", id, "err", err)
		return deliveryError(err) // ENOSPC: 452 4.3.1
	}
	keep := true
	defer func() { release(keep) }()
	cfg := &r.srv.cfg
	froms, ok := headerFrom(m.Bytes())
	if !ok {
		return replyBadHeader
	}
	for _, f := range froms {
		if !r.owns(s, f) {
			r.srv.log.Warn("message refused: From: not owned", "id", id, "user", s.acct.Address, "from_header", f)
			return replyFromNotYours
		}
	}
	now := time.Now()
	if add := missingFields(m.Bytes(), cfg.Hostname, now); add != "" {
		m.Prepend(add)
	}
	m.Prepend(receivedField(s.receivedInfo(id)))
	raw := m.Bytes()

	ctx, cancel := context.WithTimeout(r.srv.ctx, cfg.DeliverTimeout)
	defer cancel()
	if len(s.remote) > 0 {
		qid, err := r.srv.deps.Queue.Enqueue(ctx, s.acct.ID, s.from, s.remote, raw)
		if err != nil {
			keep = false
			r.srv.log.Error("queueing failed", "id", id, "err", err)
			return replyTempFailure
		}
		r.srv.log.Info("message queued", "id", id, "queue_id", qid, "rcpts", len(s.remote))
	}
	if !cfg.NoSentCopy {
		r.saveSent(ctx, s, id, raw)
	}
	if len(s.rcpts) > 0 {
		env := delivery.Envelope{ID: id, MailFrom: s.from, Recipients: s.rcpts, RemoteIP: s.ip.String(),
			Helo: s.helo, TLS: s.tls != nil, Authenticated: true}
		if _, err := r.srv.deps.Pipeline.DeliverMessage(ctx, env, m); err != nil {
			keep = false
			r.srv.log.Error("local delivery failed", "id", id, "err", err)
			if len(s.remote) == 0 {
				if errors.Is(err, delivery.ErrNoRecipients) {
					return replyNoSuchUser
				}
				return deliveryError(err)
			}
			// The remote copies are queued: a failure reply would make
			// the client send the message again and them get it twice.
			// It is accepted (RFC 5321 §6.1: a failure after that is
			// reported to the sender), and the sender told at once
			// which local recipients did not get it.
			r.srv.deps.Queue.Bounce(ctx, s.from, s.rcpts, deliveryError(err).logText(), raw)
		}
	}
	r.srv.log.Info("message submitted", "id", id, "user", s.acct.Address, "from", s.from,
		"local", len(s.rcpts), "remote", len(s.remote), "size", len(raw))
	metrics.MessagesAccepted.With(metrics.ProtoSubmission).Inc()
	return replyAccepted("queued", id)
}

// saveSent appends the message to the account's Sent mailbox (the one
// with the \Sent special use, RFC 6154), marked \Seen. A failure is
// logged: the message itself has been sent.
func (r submissionRole) saveSent(ctx context.Context, s *session, id string, raw []byte) {
	mbs, err := r.srv.deps.Mailboxes.Mailboxes(ctx, s.acct.ID)
	if err != nil {
		r.srv.log.Error("saving to Sent: listing mailboxes", "id", id, "err", err)
		return
	}
	for _, mb := range mbs {
		if mb.SpecialUse == store.SpecialSent {
			if _, err := r.srv.deps.Mailboxes.Append(ctx, mb.ID, raw, store.FlagSeen, nil, time.Time{}); err != nil {
				r.srv.log.Error("saving to Sent", "id", id, "err", err)
			}
			return
		}
	}
	r.srv.log.Warn("no Sent mailbox; copy not saved", "id", id)
}

// refused counts a refusal; the delivery log is for mail from outside.
func (submissionRole) refused(_ *session, reason string, _ *reply, _, _ string, _ ...string) {
	metrics.MessagesRejected.With(reason).Inc()
}
