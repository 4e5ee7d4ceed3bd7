package smtpserver

import (
	"context"
	"errors"
	"strings"
	"time"

	"pimail/internal/delivery"
	"pimail/internal/deliverylog"
	"pimail/internal/directory"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

// mxRole is the MX: mail from anyone for local recipients only.
type mxRole struct{ srv *Server }

var replyNoAuthHere = newReply(503, [3]int{5, 5, 1}, "AUTH not available on this port; use submission")

// greet sends the greeting. A client that is not exempt first passes the
// pregreet test (RFC 5321 §3.1, §4.3.1: a client speaks only after the
// whole greeting): the server sends the first line of a multi-line
// greeting ("220-", §4.2.1) and waits PregreetWait; a client that sends
// anything meanwhile is a bot that does not wait, and gets 554 5.7.1. The
// blocklist lookup starts first, so it runs during the wait.
func (r mxRole) greet(s *session) bool {
	cfg := &r.srv.cfg
	if r.srv.deps.DNSBL != nil {
		s.pending = r.srv.deps.DNSBL.Start(s.ip) // answered by the time the client reaches RCPT
	}
	greeting := cfg.Hostname + " ESMTP pimail"
	if cfg.PregreetWait > 0 && !r.srv.net.Exempt(s.ip) {
		s.c.raw("220-" + greeting + "\r\n")
		if s.c.flush() != nil {
			return false
		}
		_ = s.c.setReadDeadline(time.Now().Add(cfg.PregreetWait))
		var b [1]byte
		n, err := s.c.nc.Read(b[:])
		switch {
		case n > 0:
			r.srv.log.Info("connection refused: client spoke before the greeting", "ip", s.ip)
			metrics.ConnectionsRefused.With(r.srv.proto, "pregreet").Inc()
			s.c.raw(replyPregreet.line(cfg.Hostname))
			_ = s.c.flush()
			return false
		case !isTimeout(err): // the client left
			return false
		}
	}
	s.c.raw("220 " + greeting + "\r\n")
	return true
}

func (mxRole) authMechanisms(*session) []string { return nil }

// auth: the MX takes no logins (RFC 4954 §4: 503 where AUTH is not
// offered); submission is where users log in.
func (mxRole) auth(s *session, _ []byte) { s.fail(replyNoAuthHere) }

func (mxRole) mail(*session, string, mailParams) *reply { return nil }

// rcpt checks one recipient against the in-memory directory at once: an
// unknown user gets 550 5.1.1 and the session goes on (RFC 5321 §3.3).
func (r mxRole) rcpt(s *session, to string) *reply {
	// The blocklist verdict comes first, so a listed client learns
	// nothing about which recipients exist.
	if blocked, reply := r.blocklisted(s); blocked {
		r.refused(s, metrics.RejectDNSBL, reply, "", "", to)
		return reply
	}
	pipe := r.srv.deps.Pipeline
	res, err := pipe.Resolve(to)
	if err == nil && strings.Count(to, "@") != 1 {
		// A quoted local part with "@" in it reads two ways: no catch-all
		// takes it.
		err = directory.ErrUnknownUser
	}
	if err == nil && len(res.Accounts) == 0 && !pipe.Forwards() {
		// Only remote forwarding targets, and forwarding is off: a
		// temporary refusal keeps the message with the sender.
		r.srv.log.Warn("recipient forwards only to remote targets, which is not configured", "rcpt", to)
		r.refused(s, metrics.RejectTempFail, replyTempFailure, "", "", to)
		return replyTempFailure
	}
	if err != nil {
		reply := rcptError(err)
		if reply == replyTempFailure {
			r.srv.log.Warn("recipient check failed", "rcpt", to, "err", err)
		}
		reason := metrics.RejectUnknownRecipient
		if errors.Is(err, directory.ErrNotLocalDomain) {
			reason = metrics.RejectRelay
		}
		r.refused(s, reason, reply, "", "", to)
		return reply
	}
	// A full mailbox refuses its recipient only (RFC 5321 §3.3), so the
	// others of the transaction still get the message.
	if err := pipe.CheckQuota(r.srv.ctx, to, s.params.size); err != nil {
		reply := deliveryError(err)
		r.refused(s, metrics.RejectOther, reply, "", "", to)
		return reply
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

// dataPrefix is the Received field (RFC 5321 §4.4), on top of the
// message as it arrives.
func (mxRole) dataPrefix(s *session, id string) string {
	return receivedField(s.receivedInfo(id))
}

// deliver hands the message to the pipeline. The reply is 250 only after
// the store has it on disk (RFC 5321 §6.1).
func (r mxRole) deliver(s *session, id string, sp *spool, fr *framer) *reply {
	m, release, err := sp.message(fr)
	if err != nil {
		r.srv.log.Warn("spooled message unreadable", "id", id, "err", err)
		return deliveryError(err) // ENOSPC: 452 4.3.1
	}
	env := delivery.Envelope{
		ID: id, MailFrom: s.from, Recipients: s.rcpts,
		RemoteIP: s.ip.String(), Helo: s.helo, TLS: s.tls != nil,
		DNSBL: dnsblHits(r.reputation(s)),
	}
	ctx, cancel := context.WithTimeout(r.srv.ctx, r.srv.cfg.DeliverTimeout)
	defer cancel()
	if _, err := r.srv.deps.Pipeline.DeliverMessage(ctx, env, m); err != nil {
		reply := deliveryError(err)
		r.srv.log.Warn("delivery failed", "id", id, "from", s.from, "code", reply.code, "err", err)
		mid, subj := deliverylog.Identify(m.Bytes())
		r.refused(s, metrics.RejectOther, reply, mid, subj, s.rcpts...)
		release(false) // a store write given up on may still hold the buffer
		return reply
	}
	release(true)
	metrics.MessagesAccepted.With(metrics.ProtoSMTP).Inc()
	return replyAccepted("delivered", id)
}

// refused counts a refusal and records it in the delivery log, one entry
// per recipient.
func (r mxRole) refused(s *session, reason string, reply *reply, messageID, subject string, rcpts ...string) {
	metrics.MessagesRejected.With(reason).Inc()
	r.srv.deps.DeliveryLog.LogEach(store.DeliveryLogEntry{
		Direction: store.DirectionIn, Result: store.ResultRejected,
		MessageID: messageID, Subject: subject, From: s.from, RemoteIP: s.ip.String(),
		Reason: reply.logText(),
	}, rcpts)
}
