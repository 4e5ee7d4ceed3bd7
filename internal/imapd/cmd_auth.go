package imapd

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/metrics"
)

// cmdStartTLS implements STARTTLS (RFC 9051 §6.2.1).
func cmdStartTLS(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 0 {
		return "", "", bad("STARTTLS takes no arguments")
	}
	if s.srv.cfg.TLS == nil || s.tls {
		return "", "", bad("STARTTLS not available")
	}
	// Data pipelined after STARTTLS would be read as if it came over TLS
	// (command injection): refuse it.
	if s.r.Buffered() > 0 {
		return "", "", bad("data after STARTTLS")
	}
	s.w.Tagged(cmd.tag, "OK", "", "Begin TLS negotiation now")
	if err := s.flush(); err != nil {
		return "", "", err
	}
	tc := tls.Server(s.conn, s.srv.cfg.TLS)
	_ = tc.SetDeadline(time.Now().Add(time.Minute))
	if err := tc.HandshakeContext(s.ctx); err != nil {
		s.log.Info("imap tls handshake failed", "err", err)
		s.state = stateLogout
		return "", "", errAlreadyAnswered
	}
	_ = tc.SetDeadline(time.Time{})
	s.conn = tc
	s.tls = true
	s.r.SetReader(bufio.NewReaderSize(tc, 16*1024))
	s.w.SetWriter(bufio.NewWriterSize(tc, 16*1024))
	return "", "", errAlreadyAnswered
}

// errAlreadyAnswered tells the dispatcher that the handler wrote its own
// tagged response (STARTTLS must answer before the handshake).
var errAlreadyAnswered = errors.New("already answered")

// cmdLogin implements LOGIN (RFC 9051 §6.2.3).
func cmdLogin(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 2 {
		return "", "", bad("LOGIN needs a user name and a password")
	}
	user, ok1 := cmd.args[0].AString()
	pass, ok2 := cmd.args[1].AString()
	if !ok1 || !ok2 {
		return "", "", bad("LOGIN arguments must be strings")
	}
	if !s.authAllowed() {
		return "", "", no("PRIVACYREQUIRED", "LOGIN is disabled without TLS")
	}
	return s.login(user, pass)
}

// cmdAuthenticate implements AUTHENTICATE PLAIN (RFC 9051 §6.2.2, RFC 4616)
// with an optional initial response (SASL-IR, RFC 4959).
func cmdAuthenticate(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) < 1 || len(cmd.args) > 2 || cmd.args[0].Kind != imapwire.KindAtom {
		return "", "", bad("AUTHENTICATE needs a mechanism")
	}
	if upperASCII(cmd.args[0].Str) != "PLAIN" {
		return "", "", no("CANNOT", "unsupported SASL mechanism")
	}
	if !s.authAllowed() {
		return "", "", no("PRIVACYREQUIRED", "authentication is disabled without TLS")
	}
	var resp string
	if len(cmd.args) == 2 {
		r, ok := cmd.args[1].AString()
		if !ok {
			return "", "", bad("invalid initial response")
		}
		resp = r
		if resp == "=" { // RFC 4959 §3: empty initial response
			resp = ""
		}
	} else {
		s.w.Raw("+ ").CRLF()
		if err := s.flush(); err != nil {
			return "", "", err
		}
		line, err := s.r.ReadLine()
		if err != nil {
			return "", "", fmt.Errorf("reading SASL response: %w", err)
		}
		if line == "*" {
			return "", "", bad("authentication cancelled")
		}
		resp = line
	}
	raw, err := base64.StdEncoding.DecodeString(resp)
	if err != nil {
		return "", "", bad("invalid base64 in SASL response")
	}
	// RFC 4616 §2: [authzid] NUL authcid NUL passwd.
	parts := bytes.Split(raw, []byte{0})
	if len(parts) != 3 {
		return "", "", bad("invalid PLAIN response")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if authz != "" && !strings.EqualFold(authz, user) {
		s.failed++
		metrics.AuthFailures.With(metrics.ProtoIMAP).Inc()
		return "", "", no("AUTHORIZATIONFAILED", "cannot act as another user")
	}
	return s.login(user, pass)
}

// login checks credentials and moves to the authenticated state.
func (s *session) login(user, pass string) (string, string, error) {
	if s.srv.authn == nil {
		return "", "", no("UNAVAILABLE", "authentication is not available")
	}
	acct, err := s.srv.authn.Authenticate(s.ctx, user, pass, s.remoteIP)
	if err != nil {
		s.failed++
		metrics.AuthFailures.With(metrics.ProtoIMAP).Inc()
		s.log.Info("imap authentication failed", "user", user, "err", err)
		return "", "", no("AUTHENTICATIONFAILED", "authentication failed")
	}
	s.acct = acct
	s.state = stateAuth
	s.failed = 0
	s.r.SetLimits(s.limits())
	s.log = s.log.With("account", acct.Address)
	s.events, s.unsub = s.srv.st.Subscribe(acct.ID)
	s.log.Info("imap login")
	metrics.Logins.With(metrics.ProtoIMAP).Inc()
	return "CAPABILITY " + s.capabilities(), "Logged in", nil
}
