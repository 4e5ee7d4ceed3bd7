package submission

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"pimail/internal/auth"
	"pimail/internal/store"
)

// Mechanism names (RFC 4616, draft-murchison-sasl-login, RFC 7677).
const (
	mechPlain       = "PLAIN"
	mechLogin       = "LOGIN"
	mechSCRAMSHA256 = auth.MechSCRAMSHA256
)

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

// checkPassword authenticates with internal/auth.
func (s *session) checkPassword(username, password string) error {
	ctx, cancel := context.WithTimeout(s.srv.ctx, 30*time.Second)
	defer cancel()
	acct, err := s.srv.deps.Auth.Authenticate(ctx, username, password, s.remoteIP)
	if err != nil {
		return s.authError(err)
	}
	return s.authSucceeded(acct)
}

// authError turns a failure from internal/auth (which logged and counted
// it) into the reply, after the throttle's growing delay.
func (s *session) authError(err error) error {
	switch {
	case errors.Is(err, auth.ErrRateLimited):
		s.sleep(s.srv.throttle.fail(s.remoteIP, time.Now()))
		return replyAuthLimited
	case errors.Is(err, auth.ErrInvalidCredentials):
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

// scramServer adapts internal/auth's SCRAM-SHA-256 exchange (shared with
// IMAP and POP3) to go-smtp's sasl.Server. The server-final message (RFC
// 5802 §3) goes out as a 334 challenge, to which the client answers with
// an empty line (RFC 4954 §4).
type scramServer struct {
	s     *session
	sc    *auth.SCRAM
	final bool // server-final sent
}

func (s *session) newSCRAM() (sasl.Server, error) {
	sc, err := s.srv.deps.Auth.NewSCRAM(s.remoteIP)
	if err != nil {
		return nil, s.authError(err)
	}
	return &scramServer{s: s, sc: sc}, nil
}

func (ss *scramServer) Next(resp []byte) ([]byte, bool, error) {
	s := ss.s
	if ss.final {
		// The client acknowledged server-final, with an empty response.
		if len(resp) != 0 {
			ss.sc.Abort()
			return nil, false, replyAuthFailed
		}
		acct, _ := ss.sc.Account()
		return nil, true, s.authSucceeded(acct)
	}
	if resp == nil {
		return []byte{}, false, nil // ask for client-first (no initial response)
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, 10*time.Second)
	defer cancel()
	out, done, err := ss.sc.Next(ctx, resp)
	if err != nil {
		return nil, false, s.authError(err)
	}
	ss.final = done
	return out, false, nil
}
