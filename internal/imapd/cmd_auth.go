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

	"pimail/internal/auth"
	"pimail/internal/imapwire"
	"pimail/internal/metrics"
	"pimail/internal/store"
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

// scramStarter is the SCRAM side of the Authenticator
// (*auth.Authenticator implements it).
type scramStarter interface {
	NewSCRAM(remoteIP string) (*auth.SCRAM, error)
}

// authMechanisms lists the SASL mechanisms offered for AUTH= (RFC 9051
// §6.1.1); SCRAM only where the Authenticator can run it. Both are
// offered only where passwords may be sent (authAllowed).
func (s *session) authMechanisms() []string {
	if _, ok := s.srv.authn.(scramStarter); ok {
		return []string{"AUTH=" + auth.MechSCRAMSHA256, "AUTH=PLAIN"}
	}
	return []string{"AUTH=PLAIN"}
}

// errSASLCancelled: the client answered a challenge with "*" (RFC 9051
// §6.2.2); the command fails with BAD.
var errSASLCancelled = errors.New("authentication cancelled")

// saslExchange sends one server challenge as a continuation request ("+ "
// and base64, RFC 9051 §6.2.2) and returns the client's decoded response.
// It returns errSASLCancelled for "*", a *cmdError (BAD) for invalid
// base64, other errors for the connection.
func (s *session) saslExchange(challenge []byte) ([]byte, error) {
	s.w.Raw("+ " + base64.StdEncoding.EncodeToString(challenge)).CRLF()
	if err := s.flush(); err != nil {
		return nil, err
	}
	line, err := s.r.ReadLine()
	if err != nil {
		return nil, fmt.Errorf("reading SASL response: %w", err)
	}
	if line == "*" {
		return nil, errSASLCancelled
	}
	if line == "=" {
		// The empty initial response of RFC 4959 §3; some clients
		// (go-imap) also send it for an empty continuation response.
		return []byte{}, nil
	}
	raw, err := base64.StdEncoding.DecodeString(line)
	if err != nil {
		return nil, bad("invalid base64 in SASL response")
	}
	return raw, nil
}

// cmdAuthenticate implements AUTHENTICATE (RFC 9051 §6.2.2) with the
// mechanisms PLAIN (RFC 4616) and SCRAM-SHA-256 (RFC 5802, RFC 7677), with
// an optional initial response (SASL-IR, RFC 4959).
func cmdAuthenticate(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) < 1 || len(cmd.args) > 2 || cmd.args[0].Kind != imapwire.KindAtom {
		return "", "", bad("AUTHENTICATE needs a mechanism")
	}
	mech := upperASCII(cmd.args[0].Str)
	_, canSCRAM := s.srv.authn.(scramStarter)
	if mech != "PLAIN" && (mech != auth.MechSCRAMSHA256 || !canSCRAM) {
		return "", "", no("CANNOT", "unsupported SASL mechanism")
	}
	if !s.authAllowed() {
		return "", "", no("PRIVACYREQUIRED", "authentication is disabled without TLS")
	}
	var raw []byte
	if len(cmd.args) == 2 {
		r, ok := cmd.args[1].AString()
		if !ok {
			return "", "", bad("invalid initial response")
		}
		if r != "=" { // RFC 4959 §3: "=" is an empty initial response
			b, err := base64.StdEncoding.DecodeString(r)
			if err != nil {
				return "", "", bad("invalid base64 in SASL response")
			}
			raw = b
		}
	} else {
		r, err := s.saslExchange(nil)
		if errors.Is(err, errSASLCancelled) {
			return "", "", bad("authentication cancelled")
		}
		if err != nil {
			return "", "", err
		}
		raw = r
	}
	if mech == auth.MechSCRAMSHA256 {
		return s.authSCRAM(raw)
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

// authSCRAM runs the rest of a SCRAM-SHA-256 exchange (RFC 5802 §5, RFC
// 7677) whose client-first message came as the initial response or the
// answer to the first empty challenge; internal/auth checks the proof
// over the stored keys, counts and logs failures like failed passwords.
// The tagged OK carries no SASL data in IMAP (RFC 9051 §6.2.2: the
// exchange is challenges and responses, then the tagged result), so the
// server-final message is sent as a last challenge which the client
// answers with an empty line (RFC 4422 §3.6, §4 on additional data with
// success).
func (s *session) authSCRAM(clientFirst []byte) (string, string, error) {
	st, _ := s.srv.authn.(scramStarter)
	sc, err := st.NewSCRAM(s.remoteIP)
	if err != nil {
		return s.authFailed("", err)
	}
	msg := clientFirst
	for {
		out, done, err := sc.Next(s.ctx, msg)
		if err != nil {
			return s.authFailed(sc.User(), err)
		}
		resp, err := s.saslExchange(out)
		if errors.Is(err, errSASLCancelled) {
			sc.Abort()
			return "", "", bad("authentication cancelled")
		}
		if err != nil {
			sc.Abort()
			return "", "", err
		}
		if !done {
			msg = resp
			continue
		}
		if len(resp) != 0 {
			sc.Abort()
			return "", "", bad("expected an empty response to the server's final message")
		}
		acct, _ := sc.Account()
		return s.enter(acct)
	}
}

// login checks credentials and moves to the authenticated state.
func (s *session) login(user, pass string) (string, string, error) {
	if s.srv.authn == nil {
		return "", "", no("UNAVAILABLE", "authentication is not available")
	}
	acct, err := s.srv.authn.Authenticate(s.ctx, user, pass, s.remoteIP)
	if err != nil {
		return s.authFailed(user, err)
	}
	return s.enter(acct)
}

// authFailed counts a failed login (internal/auth logged it at warn
// level) and returns the NO.
func (s *session) authFailed(user string, err error) (string, string, error) {
	s.failed++
	metrics.AuthFailures.With(metrics.ProtoIMAP).Inc()
	s.log.Info("imap authentication failed", "user", user, "err", err)
	if errors.Is(err, auth.ErrRateLimited) {
		// RFC 5530 §3: a temporary failure; the client may retry later.
		return "", "", no("UNAVAILABLE", "too many failed logins, try again later")
	}
	return "", "", no("AUTHENTICATIONFAILED", "authentication failed")
}

// enter moves an authenticated account to the authenticated state.
func (s *session) enter(acct store.Account) (string, string, error) {
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
