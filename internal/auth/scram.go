package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/xdg-go/scram"

	"pimail/internal/metrics"
	"pimail/internal/password"
	"pimail/internal/store"
)

// MechSCRAMSHA256 is the SASL mechanism name of SCRAM-SHA-256 (RFC 7677).
const MechSCRAMSHA256 = "SCRAM-SHA-256"

// SCRAM is the server side of one SCRAM-SHA-256 exchange (RFC 5802 §3,
// RFC 7677) over the keys the store keeps (internal/password makes them
// when a password is set). The protocols (submission, IMAP, POP3) only
// frame its messages; the gate, the failure log and the errors are those
// of a password login through Authenticate:
//
//   - the proof is checked only after the gate lets it through, at the
//     final step (client-final), so exchanges started before the address
//     or the account was throttled are refused like new ones;
//   - a failed proof, an unknown account, an account without SCRAM keys,
//     a disabled account and a malformed message are each one failed
//     login, logged as "authentication failed" with a reason;
//   - a throttled address or account gets ErrRateLimited.
//
// Unknown accounts and accounts without keys get a made-up salt derived
// from the name, so the exchange goes on to the proof like for a real
// account and the server-first message does not tell them apart
// (RFC 5802 §9 on not disclosing which user names exist).
type SCRAM struct {
	a       *Authenticator
	conv    *scram.ServerConversation
	rkey    string // throttle key of the remote address
	ip      string
	ctx     context.Context // for the credential lookup during Next
	user    string          // lower-cased user name from client-first
	missing string          // why the credentials were made up, if they were
	at      *attempt        // the gate's attempt for the proof
	acct    store.Account
	done    bool
	failed  bool
}

// NewSCRAM starts a SCRAM-SHA-256 exchange for a client at remoteIP. It
// fails with ErrRateLimited while the address is refused for every
// account.
func (a *Authenticator) NewSCRAM(remoteIP string) (*SCRAM, error) {
	rkey, ip := remoteKey(remoteIP)
	if a.gate.sourceRefused(rkey, a.now()) {
		a.log.Warn("authentication failed", "remote", ip, "reason", "rate limited", "mech", MechSCRAMSHA256)
		return nil, fmt.Errorf("scram from %s: %w", ip, ErrRateLimited)
	}
	c := &SCRAM{a: a, rkey: rkey, ip: ip}
	srv, err := scram.SHA256.NewServer(c.credentials)
	if err != nil {
		return nil, fmt.Errorf("scram server: %w", err)
	}
	c.conv = srv.NewConversation()
	return c, nil
}

// Errors of the credential lookup that stop the conversation: a
// throttled user, and a store that failed.
var (
	errSCRAMLimited = errors.New("login throttled")
	errSCRAMStore   = errors.New("scram credentials")
)

// credentials looks up the stored keys for the user named in client-first
// (called by xdg-go/scram during the first Next).
func (c *SCRAM) credentials(name string) (scram.StoredCredentials, error) {
	user := normUser(name)
	c.user = user
	if c.a.gate.refused(user, c.rkey, c.a.now()) {
		return scram.StoredCredentials{}, errSCRAMLimited
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	k, err := c.a.st.SCRAM(ctx, user)
	switch {
	case err == nil && len(k.Salt) > 0 && k.Iterations > 0:
	case err == nil || errors.Is(err, store.ErrNotFound):
		// No account, or an account whose keys were not made for its
		// current password: go on with keys nobody knows.
		c.missing = "no scram keys"
		if _, aerr := c.a.st.Account(ctx, user); errors.Is(aerr, store.ErrNotFound) {
			c.missing = "unknown account"
		}
		k = c.a.fakeSCRAM(user)
	default:
		return scram.StoredCredentials{}, fmt.Errorf("%w of %q: %w", errSCRAMStore, user, err)
	}
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(k.Salt), Iters: k.Iterations},
		StoredKey:  k.StoredKey,
		ServerKey:  k.ServerKey,
	}, nil
}

var (
	fakeOnce   sync.Once
	fakeSecret []byte // keys the made-up salts
)

// fakeSCRAM returns credentials for a user without keys: the salt is
// stable per name (a keyed hash with a per-process secret), the keys are
// random, so no proof matches them.
func (a *Authenticator) fakeSCRAM(user string) store.SCRAMCredentials {
	fakeOnce.Do(func() {
		fakeSecret = make([]byte, 32)
		_, _ = rand.Read(fakeSecret)
	})
	m := hmac.New(sha256.New, fakeSecret)
	m.Write([]byte(user))
	salt := m.Sum(nil)[:16]
	stored, server := make([]byte, sha256.Size), make([]byte, sha256.Size)
	_, _ = rand.Read(stored)
	_, _ = rand.Read(server)
	return store.SCRAMCredentials{Salt: salt, Iterations: password.SCRAMIterations, StoredKey: stored, ServerKey: server}
}

// Next takes the client's next message (decoded from base64 by the
// protocol) and returns the server's answer. The first call takes
// client-first and returns server-first; the second takes client-final,
// passes the gate (which may wait, or refuse) and, when the proof is
// valid and the account may log in, returns server-final with done set:
// the protocol sends it (RFC 4422 §3.6: as additional data with success,
// or as a last challenge the client answers with an empty response) and
// the client is then logged in as Account(). Errors are
// ErrInvalidCredentials (the exchange failed: logged and counted),
// ErrRateLimited, or a store or context error.
func (c *SCRAM) Next(ctx context.Context, msg []byte) (out []byte, done bool, err error) {
	if c.done || c.failed {
		return nil, false, errors.New("scram: exchange already finished")
	}
	c.ctx = ctx
	defer func() { c.ctx = nil }()
	first := c.user == ""
	if !first {
		// client-final: the proof is checked only if the gate says so now.
		at, err := c.a.enter(ctx, c.user, c.rkey, c.ip, MechSCRAMSHA256)
		if err != nil {
			c.failed = true
			return nil, false, err
		}
		c.at = at
	}
	challenge, err := c.conv.Step(string(msg))
	if err != nil {
		switch {
		case errors.Is(err, errSCRAMLimited):
			c.failed = true
			metrics.AuthThrottled.Inc()
			c.a.log.Warn("authentication failed", "remote", c.ip, "user", c.user, "reason", "rate limited", "mech", MechSCRAMSHA256)
			return nil, false, fmt.Errorf("scram %q: %w", c.user, ErrRateLimited)
		case errors.Is(err, errSCRAMStore):
			c.failed = true
			c.at.end(unchecked, c.a.now()) // the store failed, not the client
			return nil, false, err
		case first:
			return nil, false, c.fail(ctx, "malformed scram message")
		case c.missing != "":
			return nil, false, c.fail(ctx, c.missing)
		}
		return nil, false, c.fail(ctx, "bad password")
	}
	if !c.conv.Done() {
		return []byte(challenge), false, nil
	}
	if !c.conv.Valid() || c.missing != "" {
		return nil, false, c.fail(ctx, "bad password")
	}
	// RFC 5802 §5.1: an authorization identity other than the user's own
	// would mean acting for someone else.
	if z := c.conv.AuthzID(); z != "" && !strings.EqualFold(z, c.user) {
		return nil, false, c.fail(ctx, "authorization identity differs")
	}
	// A valid proof: the account must still exist and be enabled.
	acct, err := c.a.st.Account(ctx, c.user)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, false, c.fail(ctx, "unknown account")
	case err != nil:
		c.failed = true
		c.at.end(unchecked, c.a.now())
		return nil, false, fmt.Errorf("scram %q: looking up account: %w", c.user, err)
	case acct.Disabled:
		return nil, false, c.fail(ctx, "account disabled")
	}
	c.at.end(succeeded, c.a.now())
	c.acct = acct
	c.done = true
	return []byte(challenge), true, nil
}

// fail counts and logs a failed exchange like a failed password login. A
// failure before the proof (a malformed client-first) passes the gate
// first, so that it is counted like the others.
func (c *SCRAM) fail(ctx context.Context, reason string) error {
	c.failed = true
	if c.at == nil {
		at, err := c.a.enter(ctx, c.user, c.rkey, c.ip, MechSCRAMSHA256)
		if err != nil {
			return err
		}
		c.at = at
	}
	c.at.end(failed, c.a.now())
	c.a.log.Warn("authentication failed", "remote", c.ip, "user", c.user, "reason", reason, "mech", MechSCRAMSHA256)
	return fmt.Errorf("scram %q: %s: %w", c.user, reason, ErrInvalidCredentials)
}

// User is the (lower-cased) user name the client gave, once known.
func (c *SCRAM) User() string { return c.user }

// Account is the logged-in account after Next returned done.
func (c *SCRAM) Account() (store.Account, bool) { return c.acct, c.done }

// Abort ends an exchange the client cancelled ("*"), or whose server-final
// it answered with anything but an empty response. A cancelled exchange
// proved nothing, so it is not counted as a failed login; the protocol
// answers it as a failure.
func (c *SCRAM) Abort() {
	c.failed = true
	c.done = false
	c.at.end(unchecked, c.a.now())
}
