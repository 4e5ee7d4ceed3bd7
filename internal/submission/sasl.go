package submission

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/xdg-go/scram"

	"pimail/internal/auth"
	"pimail/internal/store"
)

// Mechanism names (RFC 4616, draft-murchison-sasl-login, RFC 7677).
const (
	mechPlain       = "PLAIN"
	mechLogin       = "LOGIN"
	mechSCRAMSHA256 = "SCRAM-SHA-256"
)

// maxSCRAMFailures is how many failed SCRAM logins from one address within
// the throttle window block further SCRAM attempts (internal/auth counts
// password logins; SCRAM never reaches it).
var maxSCRAMFailures = auth.DefaultLimits.MaxFailures

var (
	replyAuthFailed  = &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication credentials invalid"}
	replyAuthLimited = &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many failed logins, try again later"}
	replyAuthTemp    = &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Temporary authentication failure"}
	replyNeedTLS     = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Must issue a STARTTLS command first"}
	replyNoMech      = &smtp.SMTPError{Code: 504, EnhancedCode: smtp.EnhancedCode{5, 5, 4}, Message: "Unrecognized authentication type"}
)

// authAllowed: AUTH only over TLS, or from loopback when configured
// (RFC 4954 §4: mechanisms that send passwords need a protected channel).
func (s *session) authAllowed() bool {
	if _, ok := s.conn.TLSConnectionState(); ok {
		return true
	}
	if !s.srv.cfg.InsecureLoopbackAuth {
		return false
	}
	a, err := netip.ParseAddr(s.remoteIP)
	return err == nil && a.IsLoopback()
}

// AuthMechanisms lists the mechanisms offered; none before TLS.
func (s *session) AuthMechanisms() []string {
	if !s.authAllowed() {
		return nil
	}
	return []string{mechSCRAMSHA256, mechPlain, mechLogin}
}

// Auth starts a SASL exchange.
func (s *session) Auth(mech string) (sasl.Server, error) {
	if !s.authAllowed() {
		return nil, replyNeedTLS
	}
	switch mech {
	case mechPlain:
		return sasl.NewPlainServer(func(identity, username, password string) error {
			// RFC 4616 §2: an authorization identity other than the
			// user's own would mean acting for someone else.
			if identity != "" && !strings.EqualFold(identity, username) {
				return s.authFailed(username, "authorization identity differs")
			}
			return s.checkPassword(username, password)
		}), nil
	case mechLogin:
		return &loginServer{check: s.checkPassword}, nil
	case mechSCRAMSHA256:
		return s.newSCRAM()
	}
	return nil, replyNoMech
}

// checkPassword authenticates with internal/auth and, on failure, waits
// the throttle's growing delay before the reply.
func (s *session) checkPassword(username, password string) error {
	ctx, cancel := context.WithTimeout(s.srv.ctx, 30*time.Second)
	defer cancel()
	acct, err := s.srv.deps.Auth.Authenticate(ctx, username, password, s.remoteIP)
	switch {
	case err == nil:
		return s.authSucceeded(acct)
	case errors.Is(err, auth.ErrRateLimited):
		s.sleep(s.srv.throttle.fail(s.remoteIP, time.Now()))
		return replyAuthLimited
	case errors.Is(err, auth.ErrInvalidCredentials):
		// internal/auth logged the failure.
		s.sleep(s.srv.throttle.fail(s.remoteIP, time.Now()))
		return replyAuthFailed
	default:
		s.log.Error("authentication error", "err", err)
		return replyAuthTemp
	}
}

func (s *session) authSucceeded(acct store.Account) error {
	s.acct = &acct
	s.log = s.log.With("user", acct.Address)
	s.log.Info("authenticated")
	return nil
}

// authFailed logs a failure (in internal/auth's format, for fail2ban),
// waits the throttle delay and returns the reply.
func (s *session) authFailed(user, reason string) error {
	s.srv.log.Warn("authentication failed", "remote", s.remoteIP, "user", user, "reason", reason)
	s.sleep(s.srv.throttle.fail(s.remoteIP, time.Now()))
	return replyAuthFailed
}

// sleep waits d unless the server shuts down.
func (s *session) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.srv.ctx.Done():
	}
}

// loginServer is the LOGIN mechanism: the server asks "Username:" and
// "Password:", the client answers each (base64 on the wire, done by
// go-smtp).
type loginServer struct {
	check    func(user, pass string) error
	user     string
	step     int
	finished bool
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step = 1
		if len(resp) > 0 { // initial response carries the user name
			l.user = string(resp)
			l.step = 2
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.user = string(resp)
		l.step = 2
		return []byte("Password:"), false, nil
	case 2:
		l.step = 3
		if err := l.check(l.user, string(resp)); err != nil {
			return nil, false, err
		}
		return nil, true, nil
	}
	return nil, false, errors.New("unexpected LOGIN step")
}

// scramServer adapts xdg-go/scram's conversation to go-smtp's sasl.Server.
// The server-final message (RFC 5802 §3) goes out as a 334 challenge, to
// which the client answers with an empty line (RFC 4954 §4).
type scramServer struct {
	s    *session
	conv *scram.ServerConversation
	user string
}

func (s *session) newSCRAM() (sasl.Server, error) {
	if s.srv.throttle.failures(s.remoteIP, time.Now()) >= maxSCRAMFailures {
		s.srv.log.Warn("authentication failed", "remote", s.remoteIP, "reason", "rate limited")
		return nil, replyAuthLimited
	}
	ss := &scramServer{s: s}
	srv, err := scram.SHA256.NewServer(func(user string) (scram.StoredCredentials, error) {
		ss.user = user
		ctx, cancel := context.WithTimeout(s.srv.ctx, 10*time.Second)
		defer cancel()
		c, err := s.srv.deps.Store.SCRAM(ctx, user)
		if err != nil {
			return scram.StoredCredentials{}, fmt.Errorf("scram credentials: %w", err)
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("scram server: %w", err)
	}
	ss.conv = srv.NewConversation()
	return ss, nil
}

func (ss *scramServer) Next(resp []byte) ([]byte, bool, error) {
	s := ss.s
	if ss.conv.Done() {
		// The client acknowledged server-final with an empty response.
		if !ss.conv.Valid() {
			return nil, false, s.authFailed(ss.user, "bad scram proof")
		}
		return nil, true, ss.finish()
	}
	if resp == nil {
		return []byte{}, false, nil // ask for client-first (no initial response)
	}
	challenge, err := ss.conv.Step(string(resp))
	if err != nil {
		reason := "bad scram proof"
		if ss.user == "" {
			reason = "malformed scram message"
		}
		if strings.Contains(challenge, "unknown-user") || strings.Contains(err.Error(), "scram credentials") {
			reason = "unknown account or no scram keys"
		}
		return nil, false, s.authFailed(ss.user, reason)
	}
	return []byte(challenge), false, nil
}

// finish loads the account after a valid proof: disabled accounts fail.
func (ss *scramServer) finish() error {
	s := ss.s
	ctx, cancel := context.WithTimeout(s.srv.ctx, 10*time.Second)
	defer cancel()
	acct, err := s.srv.deps.Store.Account(ctx, ss.conv.Username())
	if err != nil || acct.Disabled {
		return s.authFailed(ss.conv.Username(), "account disabled or removed")
	}
	return s.authSucceeded(acct)
}
