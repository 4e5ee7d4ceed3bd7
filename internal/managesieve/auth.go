package managesieve

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"pimail/internal/auth"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

// errCancelled ends an exchange the client cancelled, or whose response
// was malformed; the NO has been written.
var errCancelled = errors.New("authentication cancelled")

// cmdAuthenticate is AUTHENTICATE (RFC 5804 §2.1) with SASL PLAIN (RFC
// 4616) and SCRAM-SHA-256 (RFC 7677), through internal/auth, which rate
// limits and logs failed logins as for every protocol.
func cmdAuthenticate(s *session, args []argument) {
	if len(args) < 1 || len(args) > 2 || args[0].isNum || (len(args) == 2 && args[1].isNum) {
		s.bad(`Usage: AUTHENTICATE "mechanism" ["initial response"]`)
		return
	}
	mech := strings.ToUpper(args[0].s)
	if mech != "PLAIN" && mech != auth.MechSCRAMSHA256 {
		s.no("", "Unsupported mechanism "+args[0].s)
		return
	}
	if !s.authAllowed() {
		s.no("ENCRYPT-NEEDED", "Use STARTTLS before logging in")
		return
	}
	var initial []byte
	if len(args) == 2 {
		b, err := base64.StdEncoding.DecodeString(args[1].s)
		if err != nil {
			s.no("", "Invalid base64 in the initial response")
			return
		}
		initial = b
	} else {
		b, err := s.exchange(nil)
		if err != nil {
			s.endOnError(err)
			return
		}
		initial = b
	}
	if mech == auth.MechSCRAMSHA256 {
		s.authSCRAM(initial)
		return
	}
	// RFC 4616 §2: [authzid] NUL authcid NUL passwd.
	parts := bytes.Split(initial, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		s.no("", "Invalid PLAIN response")
		return
	}
	user := string(parts[1])
	if len(parts[0]) > 0 && !strings.EqualFold(string(parts[0]), user) {
		s.failed(user, auth.ErrInvalidCredentials)
		return
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	acct, err := s.srv.authn.Authenticate(ctx, user, string(parts[2]), s.remoteIP)
	if err != nil {
		s.failed(user, err)
		return
	}
	s.enter(acct, "")
}

// authSCRAM runs a SCRAM-SHA-256 exchange whose client-first message came
// with AUTHENTICATE; the server-final message goes in the OK's SASL code
// (RFC 5804 §2.1).
func (s *session) authSCRAM(clientFirst []byte) {
	sc, err := s.srv.authn.NewSCRAM(s.remoteIP)
	if err != nil {
		s.failed("", err)
		return
	}
	msg := clientFirst
	for {
		out, done, err := sc.Next(s.srv.ctx, msg)
		if err != nil {
			s.failed(sc.User(), err)
			return
		}
		if done {
			acct, _ := sc.Account()
			s.enter(acct, base64.StdEncoding.EncodeToString(out))
			return
		}
		if msg, err = s.exchange(out); err != nil {
			sc.Abort()
			s.endOnError(err)
			return
		}
	}
}

// exchange sends a challenge (a string of base64) and reads the client's
// response string; "*" cancels (RFC 5804 §2.1).
func (s *session) exchange(challenge []byte) ([]byte, error) {
	s.w.WriteString(quote(base64.StdEncoding.EncodeToString(challenge)) + "\r\n")
	if err := s.flush(); err != nil {
		return nil, err
	}
	_ = s.conn.SetReadDeadline(time.Now().Add(s.srv.cfg.IdleTimeout))
	line, err := s.r.readLine()
	if errors.Is(err, errTooLong) {
		s.no("", "Response too long")
		return nil, errCancelled
	}
	if err != nil {
		return nil, err
	}
	args, err := s.r.arguments(line)
	if err != nil || len(args) != 1 || args[0].isNum {
		s.no("", "Invalid response")
		return nil, errCancelled
	}
	if args[0].s == "*" {
		s.no("", "Authentication cancelled")
		return nil, errCancelled
	}
	b, err := base64.StdEncoding.DecodeString(args[0].s)
	if err != nil {
		s.no("", "Invalid base64 in the response")
		return nil, errCancelled
	}
	return b, nil
}

// endOnError ends the session on a connection error; a cancelled exchange
// has been answered and the session goes on.
func (s *session) endOnError(err error) {
	if !errors.Is(err, errCancelled) {
		s.done = true
	}
}

// failed answers a failed login (internal/auth logged it).
func (s *session) failed(user string, err error) {
	s.authFail++
	metrics.AuthFailures.With(metrics.ProtoManageSieve).Inc()
	s.log.Info("managesieve authentication failed", "user", user, "err", err)
	switch {
	case errors.Is(err, auth.ErrRateLimited):
		s.no("TRYLATER", "Too many failed logins, try again later")
	case errors.Is(err, auth.ErrInvalidCredentials):
		s.no("", "Authentication failed")
	default:
		s.log.Error("managesieve authentication error", "err", err)
		s.no("TRYLATER", "Authentication is temporarily unavailable")
	}
	if s.authFail >= maxAuthFailures {
		s.respond("BYE", "", "Too many failed logins")
		s.done = true
	}
}

// enter starts the authenticated state.
func (s *session) enter(acct store.Account, saslFinal string) {
	s.acct = &acct
	s.log = s.log.With("account", acct.Address)
	s.log.Info("managesieve login")
	metrics.Logins.With(metrics.ProtoManageSieve).Inc()
	if saslFinal != "" {
		s.ok("SASL "+quote(saslFinal), "Logged in")
		return
	}
	s.ok("", "Logged in")
}
