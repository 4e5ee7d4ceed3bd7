// Package auth checks login credentials for every protocol (IMAP, POP3,
// SMTP submission, webmail, web admin) against the account directory,
// with argon2id password hashes (internal/password), SCRAM-SHA-256
// (scram.go), a throttle on failed logins (throttle.go) and a cache of
// successful password checks (cache.go).
//
// Every check goes through one gate: the decision to check a password or
// a SCRAM proof and the recording of its outcome happen under one lock,
// per client address, per account and address, and per account, and a
// check under way counts as a failure until it ends, so N attempts sent at
// once count as N. Failures from an address first slow it down (Limits),
// then refuse it; the account's owner, logging in from elsewhere, is not
// locked out by them. With Share, the counts are those of every node on
// the store and survive a restart (shared.go).
//
// Failed logins are logged at warn level as
//
//	level=WARN msg="authentication failed" remote=192.0.2.7 user=bob@example.org reason=...
//
// which a fail2ban filter can match with
//
//	failregex = msg="authentication failed" remote=<HOST>
package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"pimail/internal/metrics"
	"pimail/internal/password"
	"pimail/internal/store"
)

// Errors returned by Authenticate; test them with errors.Is. Protocols
// answer ErrInvalidCredentials as a failed login and ErrRateLimited as
// "try again later" (IMAP [UNAVAILABLE], POP3 [SYS/TEMP], SMTP 454 4.7.0).
var (
	ErrInvalidCredentials = errors.New("invalid credentials")
	ErrRateLimited        = errors.New("too many failed logins, try again later")
)

// maxUsernameLen bounds the user names looked up and logged (RFC 5321
// §4.5.3.1.3 limits a path to 256 octets).
const maxUsernameLen = 320

// Store is what authentication reads: accounts with their password
// hashes, and SCRAM credentials.
type Store interface {
	store.DirectoryReader
	store.Credentials
}

// Authenticator verifies user names and passwords. It is safe for
// concurrent use; one instance serves every protocol, so that failures
// count across them.
type Authenticator struct {
	st    Store
	log   *slog.Logger
	gate  *throttle
	share *sharing // nil: the counts are this process's (shared.go)
	cache *cache   // nil: off
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	dummyOnce sync.Once
	dummy     string // hash verified for unknown users, so they cost the same
}

// New returns an Authenticator with DefaultLimits.
func New(st Store, logger *slog.Logger) *Authenticator {
	return NewWithLimits(st, logger, DefaultLimits)
}

// NewWithLimits returns an Authenticator with the given limits; zero
// fields take the default.
func NewWithLimits(st Store, logger *slog.Logger, l Limits) *Authenticator {
	if logger == nil {
		logger = slog.Default()
	}
	l = l.withDefaults()
	a := &Authenticator{st: st, log: logger, gate: newThrottle(l), now: time.Now, sleep: sleepCtx}
	if l.CacheTTL > 0 {
		a.cache = newCache(l.CacheTTL, l.MaxEntries)
	}
	return a
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dummyHash returns a hash of a random password with the default
// parameters, computed once.
func (a *Authenticator) dummyHash() string {
	a.dummyOnce.Do(func() {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		h, err := password.Hash(hex.EncodeToString(b))
		if err != nil {
			a.log.Error("auth: computing dummy hash", "err", err)
		}
		a.dummy = h
	})
	return a.dummy
}

// normUser is the account name as looked up and counted.
func normUser(username string) string {
	user := strings.ToLower(strings.TrimSpace(username))
	if len(user) > maxUsernameLen {
		user = user[:maxUsernameLen]
	}
	return user
}

// enter passes the gate for user from the remote key: refused, or after
// the throttle's wait (which ends early, with the context's error, when
// ctx does).
func (a *Authenticator) enter(ctx context.Context, user, rkey, ip, mech string) (*attempt, error) {
	at, wait, refused, err := a.gate.begin(ctx, user, rkey, a.now)
	if err != nil {
		return nil, fmt.Errorf("auth %q: %w", user, err)
	}
	if refused {
		metrics.AuthThrottled.Inc()
		args := []any{"remote", ip, "user", user, "reason", "rate limited"}
		if mech != "" {
			args = append(args, "mech", mech)
		}
		a.log.Warn("authentication failed", args...)
		return nil, fmt.Errorf("auth %q: %w", user, ErrRateLimited)
	}
	if err := a.sleep(ctx, wait); err != nil {
		at.end(unchecked, a.now()) // not checked: nothing to count
		return nil, fmt.Errorf("auth %q: %w", user, err)
	}
	return at, nil
}

// Authenticate checks username (the full address, any case) and password
// for a login from remoteIP and returns the account. It fails with
// ErrRateLimited while the throttle refuses the address (for this
// account, or for all), and with ErrInvalidCredentials for an unknown
// account, a wrong password or a disabled account; an unknown account
// costs the same hashing work as a known one, so timing does not tell them
// apart. A password checked successfully within the cache's TTL is not
// hashed again. Other errors come from the store or ctx.
func (a *Authenticator) Authenticate(ctx context.Context, username, pw, remoteIP string) (store.Account, error) {
	user := normUser(username)
	rkey, ip := remoteKey(remoteIP)
	at, err := a.enter(ctx, user, rkey, ip, "")
	if err != nil {
		return store.Account{}, err
	}
	acct, reason, err := a.check(ctx, user, pw)
	if err != nil {
		at.end(unchecked, a.now()) // the store failed, not the client
		return store.Account{}, err
	}
	if reason != "" {
		at.end(failed, a.now())
		a.log.Warn("authentication failed", "remote", ip, "user", user, "reason", reason)
		return store.Account{}, fmt.Errorf("auth %q: %s: %w", user, reason, ErrInvalidCredentials)
	}
	at.end(succeeded, a.now())
	return acct, nil
}

// check verifies the password; reason says why it failed ("" for a
// success).
func (a *Authenticator) check(ctx context.Context, user, pw string) (acct store.Account, reason string, err error) {
	acct, err = a.st.Account(ctx, user)
	known := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Account{}, "", fmt.Errorf("auth %q: looking up account: %w", user, err)
	}
	hash := acct.PasswordHash
	ok := known && hash != "" && a.cache.hit(user, pw, hash, a.now())
	if ok {
		metrics.PasswordChecks.With("cache").Inc()
	} else {
		metrics.PasswordChecks.With("hash").Inc()
		if !known || hash == "" {
			hash = a.dummyHash()
		}
		var verr error
		ok, verr = password.VerifyContext(ctx, hash, pw)
		if verr != nil {
			if ctx.Err() != nil {
				return store.Account{}, "", fmt.Errorf("auth %q: %w", user, verr)
			}
			a.log.Error("auth: stored password hash unusable", "user", user, "err", verr)
			ok = false
		}
		if ok && known && acct.PasswordHash != "" {
			a.cache.put(user, pw, acct.PasswordHash, a.now())
		}
	}
	switch {
	case !known:
		return store.Account{}, "unknown account", nil
	case acct.PasswordHash == "" || !ok:
		return store.Account{}, "bad password", nil
	case acct.Disabled:
		return store.Account{}, "account disabled", nil
	}
	return acct, "", nil
}

// Refuse counts a failed login that needed no password check (an
// authorization identity other than the user's own, RFC 4616 §2), logs it
// and returns the error to answer with.
func (a *Authenticator) Refuse(username, remoteIP, reason string) error {
	user := normUser(username)
	rkey, ip := remoteKey(remoteIP)
	at, err := a.enter(context.Background(), user, rkey, ip, "")
	if err != nil {
		return err
	}
	at.end(failed, a.now())
	a.log.Warn("authentication failed", "remote", ip, "user", user, "reason", reason)
	return fmt.Errorf("auth %q: %s: %w", user, reason, ErrInvalidCredentials)
}

// remoteKey turns a remote address ("192.0.2.1", "[2001:db8::1]:993") into
// the key its failures are counted under. IPv6 addresses count per /64,
// the usual allocation to one subscriber, so an attacker cannot escape the
// limit by rotating addresses within their own network.
//
// ip is the address alone (no port), for logs.
func remoteKey(remote string) (key, ip string) {
	s := strings.TrimSpace(remote)
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.Trim(s, "[]")
	addr, err := netip.ParseAddr(s)
	if err != nil {
		if len(s) > 64 {
			s = s[:64]
		}
		return "?" + s, s
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		if p, err := addr.Prefix(64); err == nil {
			return p.String(), addr.String()
		}
	}
	return addr.String(), addr.String()
}
