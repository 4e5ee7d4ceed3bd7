// Package auth checks login credentials for every protocol (IMAP, POP3,
// SMTP submission, webmail) against the account directory, with argon2id
// password hashes (internal/password) and a rate limit on failed logins.
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
	"strings"
	"sync"
	"time"

	"pimail/internal/password"
	"pimail/internal/store"
)

// Errors returned by Authenticate; test them with errors.Is. Protocols
// answer both the same way to a client, except that a rate-limited client
// may be told to retry later.
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
// concurrent use.
type Authenticator struct {
	st     Store
	log    *slog.Logger
	remote *limiter // failures per remote address (IPv6 per /64)
	users  *limiter // failures per account name
	now    func() time.Time

	dummyOnce sync.Once
	dummy     string // hash verified for unknown users, so they cost the same
}

// New returns an Authenticator with DefaultLimits.
func New(st Store, logger *slog.Logger) *Authenticator {
	return NewWithLimits(st, logger, DefaultLimits)
}

// NewWithLimits returns an Authenticator with the given rate limits; zero
// fields take the default.
func NewWithLimits(st Store, logger *slog.Logger, l Limits) *Authenticator {
	if logger == nil {
		logger = slog.Default()
	}
	d := DefaultLimits
	if l.MaxFailures <= 0 {
		l.MaxFailures = d.MaxFailures
	}
	if l.Window <= 0 {
		l.Window = d.Window
	}
	if l.Lockout <= 0 {
		l.Lockout = d.Lockout
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	return &Authenticator{
		st:     st,
		log:    logger,
		remote: newLimiter(l),
		users:  newLimiter(l),
		now:    time.Now,
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

// Authenticate checks username (the full address, any case) and password
// for a login from remoteIP and returns the account. It fails with
// ErrRateLimited while the remote address or the account is locked out
// after too many failures, and with ErrInvalidCredentials for an unknown
// account, a wrong password or a disabled account; an unknown account costs
// the same hashing work as a known one, so timing does not tell them apart.
// Other errors come from the store.
func (a *Authenticator) Authenticate(ctx context.Context, username, pw, remoteIP string) (store.Account, error) {
	user := strings.ToLower(strings.TrimSpace(username))
	if len(user) > maxUsernameLen {
		user = user[:maxUsernameLen]
	}
	rkey, ip := remoteKey(remoteIP)
	now := a.now()
	if a.remote.blocked(rkey, now) || a.users.blocked(user, now) {
		a.log.Warn("authentication failed", "remote", ip, "user", user, "reason", "rate limited")
		return store.Account{}, fmt.Errorf("auth %q: %w", user, ErrRateLimited)
	}

	acct, err := a.st.Account(ctx, user)
	known := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Account{}, fmt.Errorf("auth %q: looking up account: %w", user, err)
	}
	hash := acct.PasswordHash
	if !known || hash == "" {
		hash = a.dummyHash()
	}
	ok, verr := password.VerifyContext(ctx, hash, pw)
	if verr != nil {
		if ctx.Err() != nil {
			return store.Account{}, fmt.Errorf("auth %q: %w", user, verr)
		}
		a.log.Error("auth: stored password hash unusable", "user", user, "err", verr)
		ok = false
	}

	reason := ""
	switch {
	case !known:
		reason = "unknown account"
	case acct.PasswordHash == "" || !ok:
		reason = "bad password"
	case acct.Disabled:
		reason = "account disabled"
	}
	if reason == "" {
		a.users.reset(user)
		return acct, nil
	}
	now = a.now()
	blocked := a.remote.fail(rkey, now)
	if a.users.fail(user, now) {
		blocked = true
	}
	a.log.Warn("authentication failed", "remote", ip, "user", user, "reason", reason, "locked", blocked)
	return store.Account{}, fmt.Errorf("auth %q: %s: %w", user, reason, ErrInvalidCredentials)
}
