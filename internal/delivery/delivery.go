// Package delivery is the one way incoming mail enters the store: a fixed
// sequence of steps from a received message and its envelope to rows in
// the recipients' mailboxes.
//
// The steps, in order (see DeliverMessage):
//  1. resolve the envelope recipients again, against the current directory;
//  2. sender authentication, when turned on with WithAuth, for mail from
//     outside: SPF, DKIM and DMARC (internal/msgauth) on the message as
//     received; the Authentication-Results field is added later, and the
//     From domain's DMARC policy can refuse the message (*RejectError) or
//     pick Junk;
//  3. drop verdict fields that came from outside and prepend the
//     Return-Path trace field (RFC 5321 §4.4), in place (Message);
//  4. parse the message once;
//  5. content filters, when turned on with WithFilters: the attachment
//     policy and clamd (internal/av), then spam scoring (internal/spam)
//     of at most the first 512 KiB, which weighs the authentication
//     results; a refusal returns a *RejectError, junk verdicts pick the
//     Junk mailbox, and the verdict fields are added to the header;
//  6. user filters, when turned on with WithSieve (sieve.go): each
//     recipient account's active Sieve script decides where its copy
//     goes, redirects it, refuses it (*RejectError when every recipient
//     refuses) or answers it (vacation);
//  7. the quota of each recipient account (quota.go): accounts without
//     room are left out, and with none left the message is refused;
//  8. store it once for all recipients (one blob, one row per mailbox).
//
// The client's blocklist listings (Envelope.DNSBL) enter at step 5, as
// points of the spam score.
//
// The message is never copied whole on the way: fields are written into
// room in front of it and the header is moved in place (message.go), so
// a large message the SMTP server spooled and mapped from a file costs
// file pages, not heap.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"pimail/internal/deliverylog"
	"pimail/internal/directory"
	"pimail/internal/message"
	"pimail/internal/metrics"
	"pimail/internal/msgauth"
	"pimail/internal/spam"
	"pimail/internal/store"
)

// Errors returned by Deliver; callers test them with errors.Is. Any other
// error is a temporary local failure (the store), whose detail is for the
// log and never for the remote client.
var (
	// ErrNoRecipients: none of the envelope recipients receives mail here
	// any more (the directory changed since RCPT). Permanent.
	ErrNoRecipients = errors.New("delivery: no valid recipients")
	// ErrForwardingUnavailable: the recipients resolve only to remote
	// targets and the pipeline has no forwarder (WithForwarding).
	// Temporary, so the sender keeps the message.
	ErrForwardingUnavailable = errors.New("delivery: forwarding to remote targets is not available")
)

// Envelope is the SMTP envelope of one message (RFC 5321 §2.3.1).
type Envelope struct {
	// ID names the message in logs and trace fields; Deliver makes one
	// when it is empty.
	ID string
	// MailFrom is the reverse-path without angle brackets, "" for the
	// null reverse-path of bounces.
	MailFrom string
	// Recipients are the forward-paths as given at RCPT (before alias
	// expansion), each accepted by the directory at that time.
	Recipients []string
	// RemoteIP is the client's address, for logs and later for SPF/DNSBL.
	RemoteIP string
	// Helo is the name the client gave in EHLO/HELO.
	Helo string
	// TLS says the message came over an encrypted connection.
	TLS bool
	// Authenticated marks mail from inside: submitted by a logged-in
	// user (submission, webmail) or made by this server (DSNs). Sender
	// authentication (WithAuth) is skipped for it.
	Authenticated bool
	// DNSBL lists the blocklists (RFC 5782) that list the client, with
	// their configured weights: the SMTP server's lookup at connect
	// (internal/dnsbl's Verdict.Hits), below its refusal threshold. The
	// spam filter counts each (spam.Input.DNSBL).
	DNSBL []spam.DNSBLHit
}

// Store is what the pipeline needs of the store: accounts (for quota
// notices), their usage, their mailboxes (for Sieve's fileinto), and the
// delivery itself.
type Store interface {
	store.DirectoryReader
	store.Quotas
	store.MailboxReader
	store.MailboxWriter // Sieve's fileinto :create (sieve.go)
	store.Deliverer
}

// Pipeline delivers received messages into the store.
type Pipeline struct {
	st     Store
	dir    *directory.View
	logger *slog.Logger
	now    func() time.Time
	// filters are the content checks (virus, spam); see WithFilters.
	filters Filters
	// auth is sender authentication (SPF, DKIM, DMARC); see WithAuth.
	auth Auth
	// dlog records each delivery for the admin; nil records nothing.
	dlog *deliverylog.Logger
	// quotaPermanent makes over-quota refusals 552 (see quota.go).
	quotaPermanent bool
	// fwd sends mail on to remote alias targets (the outbound queue),
	// with envelope senders rewritten by srs; see WithForwarding.
	fwd    Forwarder
	srs    *SRS
	sealer Sealer // ARC for forwarded mail; see WithARC
	// sieve runs the users' Sieve scripts; see WithSieve.
	sieve *sieveStep
}

// WithDeliveryLog records every delivered message in the delivery log.
// Call it before the pipeline is used.
func (p *Pipeline) WithDeliveryLog(l *deliverylog.Logger) *Pipeline {
	p.dlog = l
	return p
}

// New returns a pipeline that resolves recipients with dir and stores into st.
func New(st Store, dir *directory.View, logger *slog.Logger) *Pipeline {
	if logger == nil {
		logger = slog.Default()
	}
	return &Pipeline{st: st, dir: dir, logger: logger.With("component", "delivery"), now: time.Now}
}

// target is where one message goes after recipient resolution.
type target struct {
	accounts []int64  // deduplicated local accounts
	remote   []string // deduplicated remote forwarding targets
	// fwdDomain is the local domain the first remote target was reached
	// through (the alias's domain): the domain of the SRS sender.
	fwdDomain string
	// rcptOf is the envelope recipient that first reached each account
	// (Sieve's envelope "to", RFC 5228 §5.4).
	rcptOf map[int64]string
}

// Deliver stores raw (the message as received, with the receiving server's
// Received field already on top) for every local recipient of env, and
// returns only when the store has it on disk. It is safe for concurrent
// use. raw is not changed: the pipeline works on a copy.
func (p *Pipeline) Deliver(ctx context.Context, env Envelope, raw []byte) ([]store.Delivered, error) {
	return p.DeliverMessage(ctx, env, copyMessage(raw, defaultRoom))
}

// DeliverMessage is Deliver for a message that the caller hands over with
// room in front of it (see Message): the pipeline adds its fields in place,
// and the message is never copied whole. m is changed, and not kept after
// the call.
func (p *Pipeline) DeliverMessage(ctx context.Context, env Envelope, m *Message) ([]store.Delivered, error) {
	start := p.now()
	if env.ID == "" {
		env.ID = NewID()
	}
	log := p.logger.With("id", env.ID)

	// Step 1: recipients, resolved again: the directory may have changed
	// since RCPT, and alias expansion happens here.
	tgt := p.resolve(log, env.Recipients)
	if len(tgt.remote) > 0 && p.fwd == nil {
		log.Warn("alias forwarding to remote targets is not configured; not forwarded",
			"remote", tgt.remote)
		if len(tgt.accounts) == 0 {
			return nil, ErrForwardingUnavailable
		}
		tgt.remote = nil
	}
	if len(tgt.accounts) == 0 && len(tgt.remote) == 0 {
		return nil, ErrNoRecipients
	}
	if len(tgt.remote) > 0 && countReceived(m.Bytes()) > MaxHops {
		log.Warn("mail loop: too many Received fields to forward", "from", env.MailFrom, "remote", tgt.remote)
		return nil, fmt.Errorf("deliver %s: %w", env.ID, errLoop)
	}

	// Step 2: sender authentication reads the message as received (DKIM
	// verifies it as signed), before anything changes it.
	// A refusal happens here or in the filters, before anything is
	// stored, so the SMTP client gets it as the reply to DATA (never
	// accept, then bounce).
	var outcome *filterOutcome
	var authRes *msgauth.Result
	if p.auth.enabled() || p.filters.enabled() {
		outcome = &filterOutcome{}
		if p.auth.applies(env) {
			var err error
			if authRes, err = p.authenticate(ctx, log, env, m.Bytes(), outcome); err != nil {
				return nil, fmt.Errorf("deliver %s: %w", env.ID, err)
			}
		}
	}

	// Step 3: trace fields. With filters or authentication on, verdict
	// fields that came from outside are dropped first, from the header
	// alone, which is moved in place.
	if p.filters.enabled() || p.auth.enabled() {
		n := headerLen(m.Bytes())
		hdr := m.Bytes()[:n]
		stripped := hdr
		if p.filters.enabled() {
			stripped = stripFilterFields(stripped)
		}
		stripped = p.auth.stripForeignAuthResults(stripped)
		if len(stripped) != n {
			m.replaceHeader(n, stripped)
		}
	}
	received := m.Bytes() // what forwarding sends on
	if err := checkHeaderFields(log, env, received); err != nil {
		return nil, fmt.Errorf("deliver %s: %w", env.ID, err)
	}
	m.Prepend(returnPath(env.MailFrom))

	// Step 4: parse once; the store keeps the result beside the message.
	parsed := parse(log, m.Bytes())

	// Step 5: content filters.
	if outcome != nil {
		if p.filters.enabled() {
			if err := p.runFilters(ctx, log, env, tgt.accounts, m.Bytes(), parsed, authRes, outcome); err != nil {
				return nil, fmt.Errorf("deliver %s: %w", env.ID, err)
			}
		}
		insertHeaders(m, parsed, outcome.headers)
	}
	full := m.Bytes()

	// Forwarding (forward.go): remote alias targets get the message as
	// received (less foreign verdict fields), through the outbound queue,
	// once it has passed the checks above. Queued before the local copies
	// are stored: should storing fail, the sender's retry may duplicate
	// the forwarded copy, but nothing is lost.
	if len(tgt.remote) > 0 {
		if err := p.forward(ctx, log, env, tgt, received, authRes); err != nil {
			return nil, fmt.Errorf("deliver %s: %w", env.ID, err)
		}
		if len(tgt.accounts) == 0 {
			metrics.DeliveryLatency.ObserveSince(start)
			return nil, nil
		}
	}

	// Step 6: user filters (sieve.go). Redirects are queued here, before
	// anything is stored, like alias forwarding above; vacation replies
	// go once the message is stored.
	rcpts := outcome.recipients(tgt.accounts)
	var replies []sieveReply
	if p.sieve != nil {
		var err error
		rcpts, replies, err = p.runSieve(ctx, log, sieveMessage{env: env, tgt: tgt, received: received,
			full: full, parsed: parsed, outcome: outcome, auth: authRes}, rcpts)
		if err != nil {
			return nil, fmt.Errorf("deliver %s: %w", env.ID, err)
		}
		if len(rcpts) == 0 {
			p.sendReplies(ctx, log, replies)
			log.Info("delivered: no copy kept by the recipients' filters", "from", env.MailFrom, "accounts", len(tgt.accounts))
			metrics.DeliveryLatency.ObserveSince(start)
			p.dlog.LogEach(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultAccepted,
				MessageID: parsed.Envelope.MessageID, Subject: parsed.Subject, From: env.MailFrom,
				RemoteIP: env.RemoteIP, Reason: "250 " + env.ID + " (no copy kept by the recipients' filters)"}, env.Recipients)
			return nil, nil
		}
	}

	// Step 7: quotas (quota.go): accounts without room are left out;
	// when none is left, the message is refused.
	rcpts, uses, refused, err := p.checkQuotas(ctx, rcpts, int64(len(full)))
	if err != nil {
		return nil, fmt.Errorf("deliver %s: %w", env.ID, err)
	}
	if len(refused) > 0 {
		// With nobody left, the caller logs the refusal of the message.
		p.quotaRefused(ctx, log, env, int64(len(full)), refused, len(rcpts) > 0)
	}
	if len(rcpts) == 0 {
		return nil, fmt.Errorf("deliver %s: %w", env.ID, p.quotaReject("every recipient is over quota"))
	}
	// Step 8: one blob, one row per recipient, one group commit.
	delivered, err := p.st.Deliver(ctx, store.Delivery{
		Raw:          full,
		Parsed:       parsed,
		InternalDate: start,
		Recipients:   rcpts,
	})
	if err != nil {
		return nil, fmt.Errorf("deliver %s: store: %w", env.ID, err)
	}
	args := []any{"from", env.MailFrom,
		"rcpts", len(env.Recipients),
		"accounts", len(delivered),
		"size", len(full),
		"ip", env.RemoteIP,
		"tls", env.TLS,
		"ms", p.now().Sub(start).Milliseconds()}
	result := store.ResultAccepted
	if outcome != nil {
		args = append(args, outcome.logArgs...)
		junk := len(outcome.junk)
		if outcome.junkAll {
			junk = len(rcpts)
		}
		args = append(args, "junk", junk)
		if junk > 0 {
			result = store.ResultJunk
			metrics.MessagesJunk.Inc()
		}
	}
	p.quotaWarn(ctx, log, int64(len(full)), uses)
	p.sendReplies(ctx, log, replies)
	log.Info("delivered", args...)
	metrics.DeliveryLatency.ObserveSince(start)
	p.dlog.LogEach(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: result,
		MessageID: parsed.Envelope.MessageID, Subject: parsed.Subject, From: env.MailFrom,
		RemoteIP: env.RemoteIP, Reason: "250 " + env.ID}, env.Recipients)
	return delivered, nil
}

// checkHeaderFields refuses a header over the toolkit's limit rather
// than have any reader see part of it: below the limit the filters, the
// index, IMAP and the webmail read every field. It runs after sender
// authentication, which reads every field whatever their number, so a
// forgery gets DMARC's refusal, not this one (RFC 3463 X.6.0).
func checkHeaderFields(log *slog.Logger, env Envelope, raw []byte) error {
	if message.CountFields(raw, message.MaxHeaderFields) <= message.MaxHeaderFields {
		return nil
	}
	log.Info("message refused: too many header fields", "from", env.MailFrom, "ip", env.RemoteIP)
	return errHeaderFields
}

// resolve expands the envelope recipients to local accounts and remote
// targets, each once. Recipients that no longer resolve are logged and
// skipped: the directory is the truth at delivery time.
func (p *Pipeline) resolve(log *slog.Logger, recipients []string) target {
	var t target
	seenAcc := make(map[int64]bool, len(recipients))
	seenRemote := map[string]bool{}
	for _, rcpt := range recipients {
		r, err := p.Resolve(rcpt)
		if err != nil {
			log.Info("recipient no longer resolves; skipped", "rcpt", rcpt, "err", err)
			continue
		}
		for _, id := range r.Accounts {
			if !seenAcc[id] {
				seenAcc[id] = true
				t.accounts = append(t.accounts, id)
				if t.rcptOf == nil {
					t.rcptOf = map[int64]string{}
				}
				t.rcptOf[id] = rcpt
			}
		}
		for _, addr := range r.Remote {
			if t.fwdDomain == "" {
				t.fwdDomain = message.DomainOf(rcpt)
			}
			if !seenRemote[addr] {
				seenRemote[addr] = true
				t.remote = append(t.remote, addr)
			}
		}
	}
	return t
}

// parse runs message.Parse, which never fails by contract. Should it panic
// on some unforeseen input, the message is still delivered, described as
// one text/plain part, rather than lost.
func parse(log *slog.Logger, raw []byte) (p *message.Parsed) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("message parser panicked; storing with a minimal description", "panic", r)
			p = minimalParsed(raw)
		}
	}()
	return message.Parse(raw)
}
