package spam

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// Reason names of the reputation step, as they appear in X-Spam-Status
// tests= and in the delivery log.
const (
	// ReasonCorrespondent: the user wrote to the sender (To/Cc/Bcc of a
	// message in \Sent) or answered their mail (\Answered).
	ReasonCorrespondent = "REPUTATION_CORRESPONDENT"
	// ReasonKept: the user keeps the sender's mail (read, in INBOX,
	// \Archive or their own folders, older than KeptAge, not flagged
	// $Junk).
	ReasonKept = "REPUTATION_KEPT"
	// ReasonJunked: the sender's mail is in \Junk (or flagged $Junk)
	// more often than it is kept.
	ReasonJunked = "REPUTATION_JUNKED"
	// ReasonUnverified (0 points): the history trusts the sender but
	// this message's sender is not authenticated, so the trust is not
	// given. Shown so that an admin sees why a known sender scored high.
	ReasonUnverified = "REPUTATION_UNVERIFIED"
)

// ReputationConfig holds the settings of a Reputation; zero values take
// the defaults.
type ReputationConfig struct {
	// Points of each class. Defaults: correspondent −4 (enough to take a
	// borderline message, up to 8 points, under the default junk
	// threshold of 4, and a certain one under the reject threshold of 12
	// into Junk instead), kept −2, junked +3 (a message that the rules
	// and the classifier rate at 1 point or more goes to Junk).
	Correspondent, Kept, Junked float64
	// KeptAge: mail must have stayed this long outside Junk and Trash to
	// count as kept (a user has not always sorted the newest). Default 3 days.
	KeptAge time.Duration
	// MaxAddresses bounds each account's summary. Default 4096.
	MaxAddresses int
	// MaxAccounts bounds the accounts held in memory (least recently
	// used are dropped, with their change-feed subscription). Default 128.
	MaxAccounts int
	// ScanPerMailbox: only the newest messages of each mailbox (by UID)
	// are read per rebuild. Default 2000.
	ScanPerMailbox int
	// MinRefresh is the least time between two rebuilds of an account;
	// the effective gap grows to 20 times the last rebuild's duration, so
	// that a large account is not rescanned back to back. Default 1 s.
	MinRefresh time.Duration
	// JunkRefresh is the least time between rebuilds caused by changes
	// of the Junk mailbox alone: every message the filter files there is
	// one, and a spam flood must not keep the account's scan running.
	// Default 30 s.
	JunkRefresh time.Duration
	// MaxAge: a summary older than this is rebuilt in the background
	// when next used (mail ages into "kept"). Default 10 min.
	MaxAge time.Duration
	Logger *slog.Logger
}

func (c *ReputationConfig) defaults() {
	if c.Correspondent == 0 {
		c.Correspondent = -4
	}
	if c.Kept == 0 {
		c.Kept = -2
	}
	if c.Junked == 0 {
		c.Junked = 3
	}
	if c.KeptAge == 0 {
		c.KeptAge = 72 * time.Hour
	}
	if c.MaxAddresses <= 0 {
		c.MaxAddresses = 4096
	}
	if c.MaxAccounts <= 0 {
		c.MaxAccounts = 128
	}
	if c.ScanPerMailbox <= 0 {
		c.ScanPerMailbox = 2000
	}
	if c.MinRefresh <= 0 {
		c.MinRefresh = time.Second
	}
	if c.JunkRefresh <= 0 {
		c.JunkRefresh = 30 * time.Second
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 10 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// repClass is what an account's history says about one address.
type repClass uint8

const (
	classNone repClass = iota
	classKept
	classJunked
	classCorrespondent
)

// Reputation is the ReputationSource over the store: each account's own
// mail says whom the user trusts. It keeps a compact summary per account
// in memory (a 64-bit hash of each address → its class), built in the
// background on the account's first message and rebuilt when the
// account's Sent or Junk mailbox changes (the store's change feed) or when
// it is older than MaxAge. Reputation never waits for a scan: until the
// summary is built it has no opinion. Safe for concurrent use.
type Reputation struct {
	st     ReputationStore
	cfg    ReputationConfig
	seed   maphash.Seed
	ctx    context.Context
	cancel context.CancelFunc
	scan   chan struct{} // one rebuild at a time: the store and the CPU are shared
	wg     sync.WaitGroup

	mu     sync.Mutex
	accts  map[int64]*repAccount
	lru    *list.List // of *repAccount, most recently used first
	closed bool
}

type repAccount struct {
	id   int64
	el   *list.Element
	sum  atomic.Pointer[repSummary]
	kick chan struct{} // cap 1: asks the worker for a rebuild
	stop context.CancelFunc
}

// repSummary is one account's history, immutable once built.
type repSummary struct {
	class map[uint64]repClass
	// special is the special use of each mailbox at build time, so that
	// change events of INBOX (every delivery) do not cause a rebuild.
	special map[int64]string
	built   time.Time
}

// ReputationStore is what Reputation reads: accounts, their mailboxes,
// the envelopes of their messages, and the change feed.
type ReputationStore interface {
	store.DirectoryReader
	store.MailboxReader
	store.HeaderReader
	store.ChangeFeed
}

// NewReputation returns a reputation source reading st. Close stops its
// background work.
func NewReputation(st ReputationStore, cfg ReputationConfig) *Reputation {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Reputation{st: st, cfg: cfg, seed: maphash.MakeSeed(), ctx: ctx, cancel: cancel,
		scan: make(chan struct{}, 1), accts: map[int64]*repAccount{}, lru: list.New()}
}

// Close stops the rebuilds and the change-feed subscriptions.
func (r *Reputation) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

// Reputation implements ReputationSource: points for what accountID's
// history says about sender (an address), ok false when it says nothing
// or is not built yet. Trusting points are given by the filter only when
// the sender is authenticated (see reputationHit).
func (r *Reputation) Reputation(ctx context.Context, accountID int64, sender string) (float64, string, bool) {
	addr := normAddr(sender)
	a := r.account(accountID)
	if a == nil || addr == "" {
		return 0, "", false
	}
	s := a.sum.Load()
	if s == nil {
		return 0, "", false
	}
	if time.Since(s.built) > r.cfg.MaxAge {
		a.wake()
	}
	switch s.class[maphash.String(r.seed, addr)] {
	case classCorrespondent:
		return r.cfg.Correspondent, ReasonCorrespondent, true
	case classKept:
		return r.cfg.Kept, ReasonKept, true
	case classJunked:
		return r.cfg.Junked, ReasonJunked, true
	}
	return 0, "", false
}

// Ready reports whether accountID's summary is built (for tests and
// status pages); it starts the build when the account is not known yet.
func (r *Reputation) Ready(accountID int64) bool {
	a := r.account(accountID)
	return a != nil && a.sum.Load() != nil
}

// Refresh asks for a rebuild of accountID's summary (it happens in the
// background, MinRefresh after the last at the earliest).
func (r *Reputation) Refresh(accountID int64) {
	if a := r.account(accountID); a != nil {
		a.wake()
	}
}

func (a *repAccount) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// account returns the account's entry, creating it (and starting its
// worker) on first use and dropping the least recently used beyond
// MaxAccounts. nil after Close.
func (r *Reputation) account(id int64) *repAccount {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if a := r.accts[id]; a != nil {
		r.lru.MoveToFront(a.el)
		return a
	}
	ctx, stop := context.WithCancel(r.ctx)
	a := &repAccount{id: id, kick: make(chan struct{}, 1), stop: stop}
	a.el = r.lru.PushFront(a)
	r.accts[id] = a
	for r.lru.Len() > r.cfg.MaxAccounts {
		old := r.lru.Remove(r.lru.Back()).(*repAccount)
		delete(r.accts, old.id)
		old.stop()
	}
	r.wg.Add(1)
	go r.run(ctx, a)
	return a
}

// run is an account's worker: it builds the summary at once, then again
// after relevant change events or a wake, never more often than the
// refresh gap allows.
func (r *Reputation) run(ctx context.Context, a *repAccount) {
	defer r.wg.Done()
	events, unsubscribe := r.st.Subscribe(a.id)
	defer unsubscribe()
	pending := refreshNow
	var last time.Time
	var took time.Duration
	var timer *time.Timer
	var fire <-chan time.Time
	armed := refreshNone // what the running timer is for
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if fire != nil && pending > armed { // something more urgent came
			timer.Stop()
			fire = nil
		}
		if pending != refreshNone && fire == nil {
			gap := r.cfg.MinRefresh
			if pending == refreshLater {
				gap = r.cfg.JunkRefresh
			}
			timer = time.NewTimer(max(time.Until(last.Add(max(gap, 20*took))), 0))
			fire, armed = timer.C, pending
		}
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil // the store is closing
				continue
			}
			pending = max(pending, r.relevant(a, ev))
		case <-a.kick:
			pending = refreshNow
		case <-fire:
			fire, pending = nil, refreshNone
			select {
			case r.scan <- struct{}{}:
			case <-ctx.Done():
				return
			}
			start := time.Now()
			s, err := r.build(ctx, a.id)
			last, took = time.Now(), time.Since(start)
			switch {
			case err == nil:
				a.sum.Store(s)
				r.cfg.Logger.Debug("sender reputation: summary built", "account", a.id, "addresses", len(s.class), "ms", took.Milliseconds())
			case !errors.Is(err, context.Canceled):
				r.cfg.Logger.Warn("sender reputation: reading the account's history failed; keeping the previous summary", "account", a.id, "err", err)
			}
			// Hold the scan slot as long again: the rebuilds of all
			// accounts together use at most half of one core.
			select {
			case <-time.After(min(took, 5*time.Second)):
			case <-ctx.Done():
			}
			<-r.scan
		}
	}
}

// How soon a change calls for a rebuild.
type refresh int

const (
	refreshNone  refresh = iota
	refreshLater         // after JunkRefresh
	refreshNow           // after MinRefresh
)

// relevant: a change of the mailbox list or of Sent (or of a mailbox
// created since the last build) is worth a rebuild soon, one of Junk
// later; INBOX and the other folders change with every delivery and
// count at the periodic rebuild (MaxAge).
func (r *Reputation) relevant(a *repAccount, ev store.Event) refresh {
	s := a.sum.Load()
	if s == nil || ev.MailboxID == 0 {
		return refreshNow
	}
	special, known := s.special[ev.MailboxID]
	switch {
	case !known || special == store.SpecialSent:
		return refreshNow
	case special == store.SpecialJunk:
		return refreshLater
	}
	return refreshNone
}

// tally counts what one address did in the account's mail.
type tally struct {
	kept, junk    uint32
	correspondent bool
}

// build reads the account's history: the newest ScanPerMailbox messages
// of each mailbox, Sent first (so that correspondents take the address
// budget before anyone else), then Junk, then the rest. Trash and Drafts
// say nothing about senders.
func (r *Reputation) build(ctx context.Context, accountID int64) (*repSummary, error) {
	mbs, err := r.st.Mailboxes(ctx, accountID)
	if err != nil {
		return nil, fmt.Errorf("mailboxes of account %d: %w", accountID, err)
	}
	own := ""
	if acct, err := r.st.AccountByID(ctx, accountID); err == nil {
		own = normAddr(acct.Address)
	}
	order := func(m store.Mailbox) int {
		switch m.SpecialUse {
		case store.SpecialSent:
			return 0
		case store.SpecialJunk:
			return 1
		}
		return 2
	}
	s := &repSummary{special: make(map[int64]string, len(mbs)), built: time.Now()}
	counts := map[uint64]*tally{}
	add := func(a message.Address) *tally {
		if a.Group != "" || a.End || a.Mailbox == "" || a.Host == "" {
			return nil
		}
		addr := normAddr(a.Mailbox + "@" + a.Host)
		if addr == "" || addr == own {
			return nil
		}
		h := maphash.String(r.seed, addr)
		t := counts[h]
		if t == nil {
			if len(counts) >= r.cfg.MaxAddresses {
				return nil
			}
			t = &tally{}
			counts[h] = t
		}
		return t
	}
	for _, m := range mbs {
		s.special[m.ID] = m.SpecialUse
	}
	for pass := range 3 {
		for _, mb := range mbs {
			if order(mb) != pass || mb.SpecialUse == store.SpecialTrash || mb.SpecialUse == store.SpecialDrafts || mb.UIDNext <= 1 {
				continue
			}
			metas, err := r.envelopes(ctx, mb)
			if err != nil {
				return nil, err
			}
			// Newest first, so that the address budget goes to recent mail.
			for i := len(metas) - 1; i >= 0; i-- {
				m := metas[i]
				if m.Flags&store.FlagDeleted != 0 || m.Parsed == nil {
					continue
				}
				env := &m.Parsed.Envelope
				switch {
				case mb.SpecialUse == store.SpecialSent:
					for _, list := range [][]message.Address{env.To, env.Cc, env.Bcc} {
						for _, a := range list {
							if t := add(a); t != nil {
								t.correspondent = true
							}
						}
					}
				case mb.SpecialUse == store.SpecialJunk || hasKeyword(m.Keywords, "$Junk"):
					for _, a := range env.From {
						if t := add(a); t != nil {
							t.junk++
						}
					}
				case m.Flags&store.FlagAnswered != 0:
					// RFC 9051 §2.3.2 \Answered: the user replied.
					for _, a := range env.From {
						if t := add(a); t != nil {
							t.correspondent = true
						}
					}
				case m.Flags&store.FlagSeen != 0 && s.built.Sub(m.InternalDate) >= r.cfg.KeptAge:
					// Read and left there for days. Unread mail is not
					// counted: spam that slipped into INBOX and lies
					// ignored must not earn its sender trust.
					for _, a := range env.From {
						if t := add(a); t != nil {
							t.kept++
						}
					}
				}
			}
		}
	}
	s.class = make(map[uint64]repClass, len(counts))
	for h, t := range counts {
		switch {
		case t.correspondent:
			s.class[h] = classCorrespondent
		case t.junk > t.kept:
			s.class[h] = classJunked
		case t.kept > 0:
			s.class[h] = classKept
		}
	}
	return s, nil
}

// envelopes reads the envelopes of the newest ScanPerMailbox UIDs of mb.
func (r *Reputation) envelopes(ctx context.Context, mb store.Mailbox) ([]store.MessageMeta, error) {
	start := uint32(1)
	if n := uint32(r.cfg.ScanPerMailbox); mb.UIDNext > n {
		start = mb.UIDNext - n
	}
	uids := store.UIDSet{{Start: start, Stop: 0}}
	metas, err := r.st.FetchEnvelopes(ctx, mb.ID, uids)
	if err != nil {
		return nil, fmt.Errorf("envelopes of mailbox %q: %w", mb.Name, err)
	}
	return metas, nil
}

func hasKeyword(kws []string, k string) bool {
	for _, x := range kws {
		if strings.EqualFold(x, k) {
			return true
		}
	}
	return false
}

// normAddr lower-cases an address and checks that it has a local part
// and a domain; "" otherwise. Local parts are case-sensitive in theory
// (RFC 5321 §2.4) but not in practice, and a reputation must not be
// split by a user's capitals.
func normAddr(s string) string {
	s = strings.ToLower(strings.TrimSpace(strings.Trim(strings.TrimSpace(s), "<>")))
	s = strings.TrimSuffix(s, ".")
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return ""
	}
	return s
}

// orgDomainOf is the organizational domain (RFC 7489 §3.2) of an
// address's domain in A-labels, as DMARC's relaxed alignment compares
// them (package message).
func orgDomainOf(addr string) string {
	d := message.DomainOf(addr)
	if a, ok := message.ASCIIDomain(d); ok {
		d = a
	}
	return message.OrgDomain(d)
}

// reputationHit asks the reputation source about the message's senders
// for one account: the From address and the envelope sender. Distrust
// counts whatever the authentication says (a forger only hurts the
// forged), trust only for an authenticated identity, since a spammer can
// write any address he likes into From or MAIL FROM:
//   - the From address when DMARC passes (an aligned SPF or DKIM pass,
//     RFC 7489 §4.2), or, for domains without DMARC, when SPF passes for
//     an envelope domain aligned with it or a DKIM signature of an
//     aligned domain verifies (relaxed alignment, RFC 7489 §3.1);
//   - the envelope sender when SPF passes (RFC 7208 §2.6.3: the client
//     is authorized by the envelope sender's domain).
//
// A trusted history that this message cannot claim gives a 0-point
// ReasonUnverified hit.
func reputationHit(ctx context.Context, src ReputationSource, id int64, in *Input, a *analysis) (Hit, bool) {
	type ident struct {
		addr string
		auth bool
	}
	var ids []ident
	env := normAddr(in.MailFrom)
	spfPass := in.SPF == "pass" && env != ""
	if from := a.parsed.Envelope.From; len(from) > 0 && from[0].Mailbox != "" && from[0].Host != "" {
		if addr := normAddr(from[0].Mailbox + "@" + from[0].Host); addr != "" {
			org := orgDomainOf(addr)
			auth := in.DMARC == "pass" || (spfPass && org == orgDomainOf(env))
			for _, d := range in.DKIMPass {
				auth = auth || message.OrgDomain(d) == org
			}
			ids = append(ids, ident{addr, auth})
		}
	}
	if env != "" && (len(ids) == 0 || ids[0].addr != env) {
		ids = append(ids, ident{env, spfPass})
	} else if env != "" {
		ids[0].auth = ids[0].auth || spfPass
	}
	var bad, good Hit
	unverified := false
	for _, id0 := range ids {
		pts, reason, ok := src.Reputation(ctx, id, id0.addr)
		switch {
		case !ok || pts == 0:
		case pts > 0:
			if pts > bad.Score {
				bad = Hit{reason, pts}
			}
		case id0.auth:
			if pts < good.Score {
				good = Hit{reason, pts}
			}
		default:
			unverified = true
		}
	}
	switch {
	case bad.Score > 0:
		return bad, true
	case good.Score < 0:
		return good, true
	case unverified:
		return Hit{ReasonUnverified, 0}, true
	}
	return Hit{}, false
}
