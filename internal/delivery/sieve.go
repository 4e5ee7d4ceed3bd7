package delivery

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"pimail/internal/message"
	"pimail/internal/msgauth"
	"pimail/internal/sieve"
	"pimail/internal/store"
)

// User filters: each recipient account's active Sieve script (internal/
// sieve), run after the spam verdict so that spamtest sees it (RFC 5235).
//
// How each action is carried out:
//   - keep and fileinto pick the account's mailboxes and flags; the
//     default mailbox (keep, the implicit keep) is Junk when the spam
//     filter filed the message there, else INBOX. fileinto to a mailbox
//     that does not exist keeps the message in the default mailbox unless
//     :create (RFC 5490 §3.2) was given, which creates it and subscribes
//     it: CREATE over IMAP leaves subscriptions alone (RFC 3501 §6.3.6),
//     but a mailbox the server made on its own would otherwise stay
//     hidden from the many clients that show only subscribed mailboxes.
//   - redirect sends the message as received through the outbound queue
//     (local targets through this pipeline), with an SRS envelope sender
//     and an ARC seal of the account's domain like alias forwarding,
//     before anything is stored; a failure defers the message. Loops
//     are cut by the X-Sieve-Redirected-From field each redirect adds
//     (an account never redirects a message it redirected before) and by
//     the Received count (MaxHops); a redirect cut this way keeps the
//     message instead.
//   - reject and ereject (RFC 5429): when every recipient refuses, the
//     SMTP client gets 550 5.7.1 with the reason (RFC 5429 §2.1.1). When
//     only some do, or the message came from inside, the sender gets a
//     delivery status notification, but only when the sender is known to
//     be genuine (a logged-in user, or SPF pass), so that forged senders
//     get no backscatter.
//   - vacation (RFC 5230): a reply once per sender and :days, recorded in
//     the store, sent with the null sender once the message is stored.
//
// A script that does not parse, or fails at run time, keeps the message
// (RFC 5228 §2.10.6); the failure is logged.

// SieveConfig turns on the user filters.
type SieveConfig struct {
	// Store holds the scripts and the vacation records.
	Store store.Sieve
	// Limits bound each run.
	Limits sieve.Limits
}

// WithSieve turns on the users' Sieve scripts. Call it before the pipeline
// is used.
func (p *Pipeline) WithSieve(c SieveConfig) *Pipeline {
	p.sieve = &sieveStep{cfg: c, scripts: map[[32]byte]*sieve.Script{}}
	return p
}

// sieveStep is the configuration and the cache of parsed scripts, by the
// hash of their text.
type sieveStep struct {
	cfg     SieveConfig
	mu      sync.Mutex
	scripts map[[32]byte]*sieve.Script
}

// maxCachedScripts bounds the cache; it is emptied when full.
const maxCachedScripts = 4096

// script returns the parsed form of src, parsing it once.
func (s *sieveStep) script(src string) (*sieve.Script, error) {
	key := sha256.Sum256([]byte(src))
	s.mu.Lock()
	sc := s.scripts[key]
	s.mu.Unlock()
	if sc != nil {
		return sc, nil
	}
	sc, err := sieve.Parse(src)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.scripts) >= maxCachedScripts {
		clear(s.scripts)
	}
	s.scripts[key] = sc
	s.mu.Unlock()
	return sc, nil
}

// sieveMessage is what the filters of one delivery see.
type sieveMessage struct {
	env      Envelope
	tgt      target
	received []byte // as received: what redirect sends on
	full     []byte // as stored
	parsed   *message.Parsed
	outcome  *filterOutcome
	auth     *msgauth.Result
}

// sieveReply is a message to send once the delivery is stored.
type sieveReply struct {
	account string
	to      string
	raw     []byte
}

// redirectedHeader marks a message an account redirected (loop control,
// RFC 5228 §4.2).
const redirectedHeader = "X-Sieve-Redirected-From"

// runSieve runs the scripts of the accounts in rcpts and returns the
// recipients their scripts keep copies for, and the replies to send
// after storing.
func (p *Pipeline) runSieve(ctx context.Context, log *slog.Logger, m sieveMessage, rcpts []store.Recipient) ([]store.Recipient, []sieveReply, error) {
	var kept []store.Recipient
	var replies []sieveReply
	type rejection struct {
		account string
		action  sieve.Action
	}
	var rejected []rejection
	redirected := false // some account sent the message on
	for _, def := range rcpts {
		acct, err := p.st.AccountByID(ctx, def.AccountID)
		if err != nil {
			return nil, nil, fmt.Errorf("sieve: account %d: %w", def.AccountID, err)
		}
		res, ran, err := p.runScript(ctx, log, m, acct)
		if err != nil {
			return nil, nil, err
		}
		if !ran {
			kept = append(kept, def)
			continue
		}
		var redirects []string
		for _, a := range res.Actions {
			switch a.Kind {
			case sieve.Keep:
				kept = append(kept, withFlags(def, a.Flags))
			case sieve.FileInto:
				r, err := p.fileinto(ctx, log, def, a)
				if err != nil {
					return nil, nil, err
				}
				kept = append(kept, r)
			case sieve.Redirect:
				redirects = append(redirects, a.Address)
			case sieve.Reject:
				rejected = append(rejected, rejection{acct.Address, a})
			case sieve.Vacation:
				if r, ok := p.vacation(ctx, log, m, acct, a.Reply); ok {
					replies = append(replies, r)
				}
			}
		}
		if len(redirects) > 0 {
			if done := p.redirect(ctx, log, m, acct.Address, redirects); done {
				redirected = true
			} else {
				kept = append(kept, def) // loop or failure: keep instead
			}
		}
	}
	if len(rejected) > 0 {
		if len(kept) == 0 && !redirected && len(m.tgt.remote) == 0 && !m.env.Authenticated {
			// RFC 5429 §2.1.1: refuse at the protocol level.
			a := rejected[0].action
			log.Info("message refused by the recipient's filter", "from", m.env.MailFrom, "account", rejected[0].account)
			return nil, nil, &RejectError{Code: 550, Enhanced: [3]int{5, 7, 1}, Message: smtpReason(a.Reason),
				Reason: "sieve reject by " + rejected[0].account}
		}
		for _, r := range rejected {
			if n, ok := p.rejectionNotice(log, m, r.account, r.action); ok {
				replies = append(replies, n)
			}
		}
	}
	return kept, replies, nil
}

// runScript runs the account's active script; ran is false when it has
// none (or it is broken and was logged: the caller keeps the message).
func (p *Pipeline) runScript(ctx context.Context, log *slog.Logger, m sieveMessage, acct store.Account) (sieve.Result, bool, error) {
	active, err := p.sieve.cfg.Store.ActiveSieveScript(ctx, acct.ID)
	if errors.Is(err, store.ErrNotFound) {
		return sieve.Result{}, false, nil
	}
	if err != nil {
		return sieve.Result{}, false, fmt.Errorf("sieve: script of %s: %w", acct.Address, err)
	}
	sc, err := p.sieve.script(active.Content)
	if err != nil {
		log.Warn("sieve script does not parse; message kept", "account", acct.Address, "script", active.Name, "err", err)
		return sieve.Result{}, false, nil
	}
	rcpt := m.tgt.rcptOf[acct.ID]
	if rcpt == "" {
		rcpt = acct.Address
	}
	in := sieve.Input{
		Raw: m.full, Parsed: m.parsed, From: m.env.MailFrom, To: rcpt,
		Addresses: []string{acct.Address, rcpt}, Now: p.now(),
		MailboxExists: func(name string) bool {
			_, err := p.st.Mailbox(ctx, acct.ID, name)
			return err == nil
		},
	}
	if m.outcome != nil {
		in.Spam = m.outcome.spam[acct.ID]
	}
	res, err := sc.Run(in, p.sieve.cfg.Limits)
	if err != nil {
		log.Warn("sieve script failed; message kept", "account", acct.Address, "script", active.Name, "err", err)
	}
	acts := make([]string, len(res.Actions))
	for i, a := range res.Actions {
		acts[i] = a.Kind.String()
	}
	log.Debug("sieve", "account", acct.Address, "script", active.Name, "actions", strings.Join(acts, ","))
	return res, true, nil
}

// withFlags adds a script's flags to a recipient (RFC 5232): system
// flags by name, the rest as keywords; flags IMAP cannot store are left
// out.
func withFlags(r store.Recipient, flags []string) store.Recipient {
	r.Keywords = append([]string(nil), r.Keywords...)
	for _, f := range flags {
		switch strings.ToLower(f) {
		case `\seen`:
			r.Flags |= store.FlagSeen
		case `\answered`:
			r.Flags |= store.FlagAnswered
		case `\flagged`:
			r.Flags |= store.FlagFlagged
		case `\deleted`:
			r.Flags |= store.FlagDeleted
		case `\draft`:
			r.Flags |= store.FlagDraft
		default:
			if validKeyword(f) {
				r.Keywords = append(r.Keywords, f)
			}
		}
	}
	return r
}

// validKeyword is an IMAP flag-keyword: an atom (RFC 9051 §9), not a
// system flag.
func validKeyword(k string) bool {
	if k == "" || len(k) > 200 || k[0] == '\\' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`(){%*"\]`, c) >= 0 {
			return false
		}
	}
	return true
}

// fileinto returns the recipient for a fileinto action: its mailbox when
// it exists or :create was given, else the default one.
func (p *Pipeline) fileinto(ctx context.Context, log *slog.Logger, def store.Recipient, a sieve.Action) (store.Recipient, error) {
	r := withFlags(def, a.Flags)
	if strings.EqualFold(a.Mailbox, "INBOX") {
		r.Mailbox = ""
		return r, nil
	}
	_, err := p.st.Mailbox(ctx, def.AccountID, a.Mailbox)
	if errors.Is(err, store.ErrNotFound) && a.Create {
		err = p.createSubscribed(ctx, def.AccountID, a.Mailbox)
	}
	switch {
	case err == nil:
		r.Mailbox = a.Mailbox
	case errors.Is(err, store.ErrNotFound):
		log.Info("sieve fileinto: no such mailbox; kept in the default one", "account_id", def.AccountID, "mailbox", a.Mailbox)
	case errors.Is(err, store.ErrInvalid):
		// RFC 5490 §3.2: failing to create the mailbox is an error, and
		// a run-time error keeps the message (RFC 5228 §2.10.6).
		log.Warn("sieve fileinto :create: the mailbox cannot be created; kept in the default one",
			"account_id", def.AccountID, "mailbox", a.Mailbox, "err", err)
	default:
		return r, fmt.Errorf("sieve fileinto %q: %w", a.Mailbox, err)
	}
	return r, nil
}

// createSubscribed creates the mailbox of a fileinto :create and
// subscribes it (see the top of this file). A delivery that created it
// first wins; the subscription is then that delivery's.
func (p *Pipeline) createSubscribed(ctx context.Context, accountID int64, name string) error {
	_, err := p.st.CreateMailbox(ctx, accountID, name, store.SpecialNone)
	if errors.Is(err, store.ErrExists) {
		return nil
	}
	if err != nil {
		return err
	}
	return p.st.SetSubscribed(ctx, accountID, name, true)
}

// redirect sends the message on for one account. It returns false when
// loop control stopped it (the caller keeps the message); a queue failure
// is logged and also keeps it, so nothing is lost.
func (p *Pipeline) redirect(ctx context.Context, log *slog.Logger, m sieveMessage, account string, to []string) bool {
	for _, f := range message.HeaderFields(m.received) {
		if strings.EqualFold(f.Name, redirectedHeader) && strings.EqualFold(f.Unfolded(), account) {
			log.Warn("sieve redirect loop: the message was redirected by this account before; kept", "account", account, "to", to)
			return false
		}
	}
	if countReceived(m.received) > MaxHops {
		log.Warn("sieve redirect: too many Received fields; kept", "account", account, "to", to)
		return false
	}
	raw := append([]byte(redirectedHeader+": "+account+"\r\n"), m.received...)
	// Sealed like alias forwarding, by the account's domain, so that the
	// next receiver can trust the results from before the envelope
	// changed (RFC 8617; forward.go).
	raw = p.seal(ctx, log, message.DomainOf(account), raw, m.auth)
	from := m.env.MailFrom
	if p.srs != nil && from != "" && !p.dir.IsLocalDomain(message.DomainOf(from)) {
		from = p.srs.Forward(from, message.DomainOf(account)) // SRS, as for alias forwarding
	}
	if err := p.sendOn(ctx, from, to, raw); err != nil {
		log.Error("sieve redirect failed; message kept", "account", account, "to", to, "err", err)
		return false
	}
	log.Info("sieve redirect", "account", account, "to", to, "envelope_from", from)
	return true
}

// sendOn sends raw from the envelope sender from: local recipients
// through this pipeline (as mail from inside), others through the
// outbound queue.
func (p *Pipeline) sendOn(ctx context.Context, from string, rcpts []string, raw []byte) error {
	var local, remote []string
	for _, r := range rcpts {
		if p.dir.IsLocalDomain(message.DomainOf(r)) {
			local = append(local, r)
		} else {
			remote = append(remote, r)
		}
	}
	if len(remote) > 0 {
		if p.fwd == nil {
			return ErrForwardingUnavailable
		}
		if err := p.fwd.Forward(ctx, from, remote, raw); err != nil {
			return err
		}
	}
	if len(local) > 0 {
		_, err := p.Deliver(ctx, Envelope{MailFrom: from, Recipients: local, Authenticated: true, RemoteIP: "127.0.0.1"}, raw)
		return err
	}
	return nil
}

// sendReplies sends vacation replies and rejection notices; failures are
// logged only: the message they answer is stored.
func (p *Pipeline) sendReplies(ctx context.Context, log *slog.Logger, replies []sieveReply) {
	for _, r := range replies {
		if err := p.sendOn(ctx, "", []string{r.to}, r.raw); err != nil {
			log.Warn("sieve reply not sent", "account", r.account, "to", r.to, "err", err)
			continue
		}
		log.Info("sieve reply sent", "account", r.account, "to", r.to)
	}
}

// vacation decides whether a vacation reply goes: the rules of RFC 5230
// §4.5 (checked by the interpreter), then the response record of the
// store (RFC 5230 §4.1).
func (p *Pipeline) vacation(ctx context.Context, log *slog.Logger, m sieveMessage, acct store.Account, v *sieve.VacationReply) (sieveReply, bool) {
	if v.Skip != "" {
		log.Info("sieve vacation: no reply", "account", acct.Address, "sender", m.env.MailFrom, "why", v.Skip)
		return sieveReply{}, false
	}
	ok, err := p.sieve.cfg.Store.ClaimVacationReply(ctx, acct.ID, v.Handle, v.Recipient, p.now(), time.Duration(v.Days)*24*time.Hour)
	if err != nil {
		log.Warn("sieve vacation: record failed; no reply", "account", acct.Address, "err", err)
		return sieveReply{}, false
	}
	if !ok {
		log.Info("sieve vacation: replied within :days already", "account", acct.Address, "sender", v.Recipient, "days", v.Days)
		return sieveReply{}, false
	}
	from := acct.Address
	if v.From != "" {
		if a, ok := p.ownAddress(acct, v.From); ok {
			from = a
		} else {
			log.Info("sieve vacation :from is not the user's address; the account's is used", "account", acct.Address, "from", v.From)
		}
	}
	return sieveReply{account: acct.Address, to: v.Recipient, raw: vacationMessage(v, m.parsed, m.full, from, p.now())}, true
}

// ownAddress returns the address of s when it reaches the account (its
// own address, a subaddress or an alias of it), so that users cannot send
// replies in another user's name.
func (p *Pipeline) ownAddress(acct store.Account, s string) (string, bool) {
	list := message.ParseAddressList(s)
	if len(list) != 1 || list[0].Host == "" {
		return "", false
	}
	addr := list[0].Addr()
	r, err := p.dir.Resolve(addr)
	if err != nil {
		return "", false
	}
	for _, id := range r.Accounts {
		if id == acct.ID {
			return addr, true
		}
	}
	return "", false
}

// rejectionNotice builds the notice for a refusal that could not be made
// at the protocol level, when the sender is genuine (see above).
func (p *Pipeline) rejectionNotice(log *slog.Logger, m sieveMessage, account string, a sieve.Action) (sieveReply, bool) {
	genuine := m.env.Authenticated || (m.auth != nil && m.auth.SPF.Result == "pass")
	if m.env.MailFrom == "" || !genuine {
		log.Info("sieve reject: message dropped for this recipient without a notice (null or unverified sender)",
			"account", account, "from", m.env.MailFrom)
		return sieveReply{}, false
	}
	log.Info("sieve reject: notice sent to the sender", "account", account, "from", m.env.MailFrom)
	return sieveReply{account: account, to: m.env.MailFrom,
		raw: rejectionMessage(account, m.env.MailFrom, a, m.full, m.parsed, p.now())}, true
}
