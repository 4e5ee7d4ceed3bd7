package auth

import (
	"context"
	"math"
	"sync"
	"time"

	"pimail/internal/store"
)

// Limits configure the login throttle. Failed logins are counted in three
// places: per client address (an IPv4 address or an IPv6 /64), per account
// and client address, and per account from every address. Each count
// leaks away at a steady rate, its whole allowance over its window, so a
// client that keeps guessing gets the allowance again only that slowly.
//
// The client address comes first: an attacker's failures stop the
// attacker, not the account's owner, who logs in from other addresses.
// The per-account ceiling is for distributed guessing (many addresses, one
// account); past it, only addresses the owner logged in from before
// (KnownSourceTTL) still get through, slowed by MaxDelay.
type Limits struct {
	// MaxFailures is the allowance of one account from one address:
	// past it, that address is refused for that account. Default 10.
	MaxFailures int
	// SourceFailures is the allowance of one address over all accounts
	// (an office behind one address has several users). Default 30.
	SourceFailures int
	// Window is how long the MaxFailures and SourceFailures allowances
	// take to come back. Default 15 minutes.
	Window time.Duration
	// AccountFailures is the allowance of one account over all addresses,
	// AccountWindow its window. Defaults 100 per hour.
	AccountFailures int
	AccountWindow   time.Duration
	// FreeFailures failures of an account from an address cost nothing;
	// each further attempt first waits Delay, doubled for each failure
	// since, up to MaxDelay. Defaults 3, 1 s, 16 s.
	FreeFailures    int
	Delay, MaxDelay time.Duration
	// KnownSourceTTL is how long an address an account logged in from
	// stays one of its own for the account ceiling; default 30 days.
	KnownSourceTTL time.Duration
	// MaxEntries bounds each table (addresses, account and address pairs,
	// accounts, cached logins), so that a flood from many addresses cannot
	// exhaust memory. Default 65,536.
	MaxEntries int
	// CacheTTL is how long a successful password check is remembered
	// (Cache); default an hour, as Dovecot's auth_cache_ttl. Negative:
	// no cache.
	CacheTTL time.Duration
}

// DefaultLimits are the limits of New.
var DefaultLimits = Limits{
	MaxFailures: 10, SourceFailures: 30, Window: 15 * time.Minute,
	AccountFailures: 100, AccountWindow: time.Hour,
	FreeFailures: 3, Delay: time.Second, MaxDelay: 16 * time.Second,
	KnownSourceTTL: 30 * 24 * time.Hour, MaxEntries: 65536, CacheTTL: time.Hour,
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, def *int }{
		{&l.MaxFailures, &d.MaxFailures}, {&l.SourceFailures, &d.SourceFailures},
		{&l.AccountFailures, &d.AccountFailures}, {&l.MaxEntries, &d.MaxEntries},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if l.FreeFailures == 0 {
		l.FreeFailures = d.FreeFailures
	}
	for _, f := range []struct{ v, def *time.Duration }{
		{&l.Window, &d.Window}, {&l.AccountWindow, &d.AccountWindow}, {&l.Delay, &d.Delay},
		{&l.MaxDelay, &d.MaxDelay}, {&l.KnownSourceTTL, &d.KnownSourceTTL},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if l.CacheTTL == 0 {
		l.CacheTTL = d.CacheTTL
	}
	return l
}

// counter is a leaky count of failures, plus the attempts under way.
// Attempts count as failures until they end, so N attempts sent at once
// are N for the decision of each (the issue with checking first and
// counting after: all of them are checked).
type counter struct {
	level   float64 // failures, leaking at rate per second
	last    time.Time
	pending int
	known   map[string]time.Time // per account: addresses it logged in from
}

func (c *counter) decay(now time.Time, rate float64) {
	if el := now.Sub(c.last).Seconds(); el > 0 {
		c.level = math.Max(0, c.level-el*rate)
	}
	c.last = now
}

func (c *counter) load() float64 { return c.level + float64(c.pending) }

func (c *counter) idle() bool { return c.pending == 0 && c.level < 0.01 && len(c.known) == 0 }

// table is a bounded map of counters.
type table struct {
	m    map[string]*counter
	rate float64 // leak per second
	max  int
}

func newTable(allowance int, window time.Duration, max int) table {
	return table{m: map[string]*counter{}, rate: float64(allowance) / window.Seconds(), max: max}
}

// get returns key's counter, decayed to now, creating it (after making
// room) when absent.
func (t *table) get(key string, now time.Time) *counter {
	c := t.m[key]
	if c == nil {
		if len(t.m) >= t.max {
			t.evict(now)
		}
		c = &counter{last: now}
		t.m[key] = c
	}
	c.decay(now, t.rate)
	return c
}

// evict drops the counters that no longer hold anything, then, if the
// table is still full, the lowest ones without attempts under way, down
// to 90 %: a flood of new keys cannot push out a busy attacker's count,
// only other floods'.
func (t *table) evict(now time.Time) {
	for k, c := range t.m {
		c.decay(now, t.rate)
		if c.idle() {
			delete(t.m, k)
		}
	}
	for limit := 1.0; len(t.m) > t.max*9/10 && limit < 1e9; limit *= 2 {
		for k, c := range t.m {
			if c.pending == 0 && c.level < limit {
				delete(t.m, k)
				if len(t.m) <= t.max*9/10 {
					break
				}
			}
		}
	}
}

// throttle is the gate every password and SCRAM proof check goes
// through. One lock covers the decision to check and the recording of
// the outcome, for the address, the account and the pair.
type throttle struct {
	lim      Limits
	mu       sync.Mutex
	sources  table         // per client address
	pairs    table         // per account and client address
	accounts table         // per account; known addresses
	ended    chan struct{} // closed (and replaced) when an attempt ends
	// node names this process in the store's log of logins ("": the
	// counts are this process's alone); out holds the logins counted
	// here and not yet written there (shared.go).
	node string
	out  []store.LoginEvent
}

func newThrottle(l Limits) *throttle {
	return &throttle{
		ended:    make(chan struct{}),
		lim:      l,
		sources:  newTable(l.SourceFailures, l.Window, l.MaxEntries),
		pairs:    newTable(l.MaxFailures, l.Window, l.MaxEntries),
		accounts: newTable(l.AccountFailures, l.AccountWindow, l.MaxEntries),
	}
}

// attempt is one check let through the gate; end records its outcome.
type attempt struct {
	t         *throttle
	user, src string
	ended     bool
}

// begin decides whether user may have a password checked from src now.
// It returns the attempt and how long to wait before checking, or
// refused. An attempt under way counts as a failure until it ends: when
// the failures so far leave room but those with the attempts under way
// would not, begin waits for attempts to end (until ctx is done) and
// decides again. So N attempts sent at once never get more checks than
// the allowance, and a burst of right passwords is only held up.
func (t *throttle) begin(ctx context.Context, user, src string, now func() time.Time) (a *attempt, wait time.Duration, refused bool, err error) {
	for {
		t.mu.Lock()
		a, wait, refused, busy := t.decide(user, src, now())
		ended := t.ended
		t.mu.Unlock()
		if !busy {
			return a, wait, refused, nil
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return nil, 0, false, ctx.Err()
		}
	}
}

// decide is begin's decision under the lock; busy means "wait for an
// attempt to end".
func (t *throttle) decide(user, src string, now time.Time) (a *attempt, wait time.Duration, refused, busy bool) {
	s := t.sources.get(src, now)
	p := t.pairs.get(user+"\x00"+src, now)
	acc := t.accounts.get(user, now)
	switch {
	case fullDone(s, t.lim.SourceFailures) || fullDone(p, t.lim.MaxFailures):
		return nil, 0, true, false
	case full(s, t.lim.SourceFailures) || full(p, t.lim.MaxFailures):
		return nil, 0, false, true
	}
	// The delay grows with this pair's failures, or a third of the
	// address's (many accounts from one address): failures that
	// happened, not attempts under way, which a client that opens several
	// connections at once has without any failure.
	n := int(math.Round(math.Max(p.level, s.level/3)))
	if n >= t.lim.FreeFailures {
		wait = t.lim.Delay
		for i := t.lim.FreeFailures; i < n && wait < t.lim.MaxDelay; i++ {
			wait *= 2
		}
		wait = min(wait, t.lim.MaxDelay)
	}
	if full(acc, t.lim.AccountFailures) {
		if seen, ok := acc.known[src]; !ok || now.Sub(seen) > t.lim.KnownSourceTTL {
			if !fullDone(acc, t.lim.AccountFailures) {
				return nil, 0, false, true
			}
			return nil, 0, true, false
		}
		wait = t.lim.MaxDelay // the owner's own address: slowed, not refused
	}
	s.pending++
	p.pending++
	acc.pending++
	return &attempt{t: t, user: user, src: src}, wait, false, false
}

// outcome is how an attempt ended.
type outcome int

const (
	failed    outcome = iota // counted as a failure
	succeeded                // clears the pair's failures; src becomes the account's
	unchecked                // nothing was checked (the store failed, the client left): not counted
)

// end records the outcome. A success clears the pair's failures and makes
// src one of the account's addresses; the address's failures stay (an
// attacker's own account must not wash its guesses at others away). An
// attempt that was not checked counts as nothing, neither a failure nor a
// success (which would clear the pair for a client that hangs up during
// each wait).
func (a *attempt) end(o outcome, now time.Time) {
	if a == nil || a.ended {
		return
	}
	a.ended = true
	t := a.t
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sources.get(a.src, now)
	p := t.pairs.get(a.user+"\x00"+a.src, now)
	acc := t.accounts.get(a.user, now)
	s.pending--
	p.pending--
	acc.pending--
	close(t.ended)
	t.ended = make(chan struct{})
	switch o {
	case succeeded:
		// Other nodes learn of a success that changes what they count
		// or remember (and of a known address once a day).
		seen, ok := acc.known[a.src]
		if p.level > 0 || !ok || now.Sub(seen) > knownRefresh {
			t.record(a.user, a.src, now, true)
		}
		p.level = 0
		acc.addKnown(a.src, now, t.lim.KnownSourceTTL)
	case failed:
		t.record(a.user, a.src, now, false)
		s.level++
		p.level++
		acc.level++
	}
}

// addKnown makes src one of an account's addresses, seen at the given
// time (or later, if it was seen later).
func (c *counter) addKnown(src string, at time.Time, ttl time.Duration) {
	if c.known == nil {
		c.known = map[string]time.Time{}
	}
	if seen, ok := c.known[src]; ok && !seen.Before(at) {
		return
	}
	if _, ok := c.known[src]; !ok && len(c.known) >= maxKnownSources {
		for k, seen := range c.known {
			if at.Sub(seen) > ttl || len(c.known) >= maxKnownSources {
				delete(c.known, k)
			}
		}
	}
	c.known[src] = at
}

// maxKnownSources bounds the addresses remembered per account.
const maxKnownSources = 32

// sourceRefused reports, without starting an attempt, whether src is
// refused for every account (the cheap check before a SCRAM exchange).
func (t *throttle) sourceRefused(src string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fullDone(t.sources.get(src, now), t.lim.SourceFailures)
}

// refused reports, without starting an attempt, whether begin would refuse
// user from src now (SCRAM's early answer at client-first; the proof
// still passes begin).
func (t *throttle) refused(user, src string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if fullDone(t.sources.get(src, now), t.lim.SourceFailures) || fullDone(t.pairs.get(user+"\x00"+src, now), t.lim.MaxFailures) {
		return true
	}
	acc := t.accounts.get(user, now)
	if !fullDone(acc, t.lim.AccountFailures) {
		return false
	}
	seen, ok := acc.known[src]
	return !ok || now.Sub(seen) > t.lim.KnownSourceTTL
}

// full reports whether a count, with the attempts under way, has no room
// for another attempt: the allowance is a bucket of limit that leaks, and
// an attempt needs a whole unit of room (a count of 1.9999 a moment after
// two failures is full for a limit of 2). fullDone counts only the
// failures that happened.
func full(c *counter, limit int) bool { return c.load() > float64(limit-1)+1e-9 }

func fullDone(c *counter, limit int) bool { return c.level > float64(limit-1)+1e-9 }
