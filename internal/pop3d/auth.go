package pop3d

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"pimail/internal/auth"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

// plainAuthAllowed is the project's rule for sending passwords: over TLS,
// from a loopback address (nothing crosses a network), or anywhere when
// the administrator allows insecure authentication.
func plainAuthAllowed(secure, allowInsecure bool, remoteIP string) bool {
	if secure || allowInsecure {
		return true
	}
	ip, err := netip.ParseAddr(remoteIP)
	if err != nil {
		return false
	}
	return ip.Unmap().IsLoopback()
}

func (s *session) authAllowed() bool {
	return plainAuthAllowed(s.tls, s.srv.cfg.AllowInsecureAuth, s.remoteIP)
}

// msgPrivacy refuses a login without TLS. Like other POP3 servers it uses
// [AUTH] (RFC 3206 §4): retrying the same way will not work.
const msgPrivacy = "-ERR [AUTH] plain-text authentication requires TLS; use STLS"

// cmdCapa lists the capabilities of the current state (RFC 2449 §5).
func cmdCapa(s *session, arg string) error {
	if arg != "" {
		return s.invalid("-ERR CAPA takes no arguments")
	}
	s.reply("+OK capability list follows")
	for _, c := range s.capabilities() {
		s.reply(c)
	}
	s.reply(".")
	return nil
}

func (s *session) capabilities() []string {
	caps := []string{"TOP", "UIDL", "RESP-CODES", "AUTH-RESP-CODE", "PIPELINING"}
	if s.state == stateAuthorization {
		if s.authAllowed() {
			caps = append(caps, "USER", "SASL "+strings.Join(s.mechanisms(), " "))
		}
		if s.srv.cfg.TLS != nil && !s.tls {
			caps = append(caps, "STLS")
		}
	}
	return append(caps, "IMPLEMENTATION pimail")
}

// cmdStls starts TLS (RFC 2595 §4).
func cmdStls(s *session, arg string) error {
	if arg != "" {
		return s.invalid("-ERR STLS takes no arguments")
	}
	if s.srv.cfg.TLS == nil {
		return s.invalid("-ERR STLS not available")
	}
	if s.tls {
		return s.invalid("-ERR already using TLS")
	}
	s.reply("+OK begin TLS negotiation")
	if err := s.flush(); err != nil {
		return err
	}
	tc := tls.Server(s.conn, s.srv.cfg.TLS)
	_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.HandshakeContext(s.ctx); err != nil {
		s.log.Info("pop3 tls handshake failed", "err", err)
		s.state = stateDone
		return nil
	}
	_ = tc.SetDeadline(time.Time{})
	s.conn = tc
	s.tls = true
	// Whatever the client sent after STLS before the handshake was not
	// protected: the reader is reset so that it is discarded, and so is
	// any USER name given before (RFC 2595 §4; the client must also
	// forget the capabilities learnt before TLS).
	s.r.reset(tc)
	s.user = ""
	return nil
}

// cmdUser names the mailbox for PASS (RFC 1939 §7).
func cmdUser(s *session, arg string) error {
	if !s.authAllowed() {
		return s.invalid(msgPrivacy)
	}
	if arg == "" || strings.ContainsAny(arg, " \t") {
		return s.invalid("-ERR USER needs one argument")
	}
	s.user = arg
	// The answer does not tell whether the user exists.
	s.reply("+OK send PASS")
	return nil
}

// cmdPass checks the password for the name given by USER (RFC 1939 §7).
// The whole rest of the line is the password: it may contain spaces.
func cmdPass(s *session, arg string) error {
	if !s.authAllowed() {
		return s.invalid(msgPrivacy)
	}
	if s.user == "" {
		return s.invalid("-ERR USER first")
	}
	user := s.user
	s.user = ""
	s.login(user, arg)
	return nil
}

// scramStarter is the SCRAM side of the Authenticator
// (*auth.Authenticator implements it).
type scramStarter interface {
	NewSCRAM(remoteIP string) (*auth.SCRAM, error)
}

// mechanisms lists the SASL mechanisms offered (only where passwords may
// be sent: SCRAM is offered under the same rule as PLAIN).
func (s *session) mechanisms() []string {
	if _, ok := s.srv.authn.(scramStarter); ok {
		return []string{auth.MechSCRAMSHA256, "PLAIN"}
	}
	return []string{"PLAIN"}
}

// errCancelled is returned by saslExchange when the client answered a
// challenge with "*" (RFC 5034 §4); the reply has been queued.
var errCancelled = errors.New("authentication cancelled")

// saslExchange sends one challenge ("+ " and the base64 data, RFC 5034
// §4) and returns the client's decoded response. On a cancel, bad base64
// or an over-long line it queues the -ERR reply and returns errCancelled;
// other errors are connection errors.
func (s *session) saslExchange(challenge []byte) ([]byte, error) {
	s.reply("+ " + base64.StdEncoding.EncodeToString(challenge))
	if err := s.flush(); err != nil {
		return nil, err
	}
	_ = s.conn.SetReadDeadline(time.Now().Add(s.srv.cfg.IdleTimeout))
	line, err := s.r.readLine()
	if errors.Is(err, errLineTooLong) {
		if err := s.invalid("-ERR authentication response too long"); err != nil {
			return nil, err
		}
		return nil, errCancelled
	}
	if err != nil {
		return nil, err
	}
	if line == "*" {
		s.reply("-ERR authentication cancelled")
		return nil, errCancelled
	}
	if line == "=" {
		// "=" is the empty initial response (RFC 5034 §4); some clients
		// send it for an empty response to a challenge too.
		return []byte{}, nil
	}
	raw, err := base64.StdEncoding.DecodeString(line)
	if err != nil {
		if err := s.invalid("-ERR invalid base64 in authentication response"); err != nil {
			return nil, err
		}
		return nil, errCancelled
	}
	return raw, nil
}

// authSCRAM runs the rest of a SCRAM-SHA-256 exchange (RFC 5802 §5, RFC
// 7677) whose client-first message came with AUTH or as the answer to
// its empty challenge; internal/auth checks the proof over the stored
// keys, counts and logs failures. The +OK of AUTH carries no SASL data
// (RFC 5034 §4, §6), so the server-final message goes out as one more
// challenge, which the client answers with an empty line (RFC 4422 §3.6,
// §4: additional data with success in a protocol without it).
func (s *session) authSCRAM(clientFirst []byte) error {
	st, ok := s.srv.authn.(scramStarter)
	if !ok {
		return s.invalid("-ERR unrecognized authentication type")
	}
	sc, err := st.NewSCRAM(s.remoteIP)
	if err != nil {
		s.authFailed("", err)
		return nil
	}
	msg := clientFirst
	for {
		out, done, err := sc.Next(s.ctx, msg)
		if err != nil {
			s.authFailed(sc.User(), err)
			return nil
		}
		resp, err := s.saslExchange(out)
		if errors.Is(err, errCancelled) {
			sc.Abort()
			return nil
		}
		if err != nil {
			return err
		}
		if !done {
			msg = resp
			continue
		}
		if len(resp) != 0 {
			sc.Abort()
			s.failed++
			return s.invalid("-ERR [AUTH] expected an empty response to the server's final message")
		}
		acct, _ := sc.Account()
		s.enter(acct)
		return nil
	}
}

// cmdAuth implements AUTH (RFC 5034 §4) with the mechanisms PLAIN (RFC
// 4616) and SCRAM-SHA-256 (RFC 5802, RFC 7677), with or without an
// initial response. "AUTH" alone lists the mechanisms, as clients written
// for RFC 1734 expect.
func cmdAuth(s *session, arg string) error {
	if arg == "" {
		s.reply("+OK supported mechanisms follow")
		if s.authAllowed() {
			for _, m := range s.mechanisms() {
				s.reply(m)
			}
		}
		s.reply(".")
		return nil
	}
	mech, initial, hasInitial := strings.Cut(arg, " ")
	scramMech := strings.EqualFold(mech, auth.MechSCRAMSHA256)
	if !strings.EqualFold(mech, "PLAIN") && !scramMech {
		return s.invalid("-ERR unrecognized authentication type")
	}
	if !s.authAllowed() {
		return s.invalid(msgPrivacy)
	}
	s.user = ""
	var raw []byte
	switch {
	case hasInitial && initial == "=":
		raw = []byte{} // RFC 5034 §4: "=" is an empty initial response
	case hasInitial:
		r, err := base64.StdEncoding.DecodeString(initial)
		if err != nil {
			return s.invalid("-ERR invalid base64 in authentication response")
		}
		raw = r
	default:
		// RFC 5034 §4: an empty challenge, then the client's response.
		r, err := s.saslExchange(nil)
		if errors.Is(err, errCancelled) {
			return nil
		}
		if err != nil {
			return err
		}
		raw = r
	}
	if scramMech {
		return s.authSCRAM(raw)
	}
	// RFC 4616 §2: [authzid] NUL authcid NUL passwd.
	parts := bytes.Split(raw, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return s.invalid("-ERR invalid PLAIN response")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if authz != "" && !strings.EqualFold(authz, user) {
		s.failed++
		metrics.AuthFailures.With(metrics.ProtoPOP3).Inc()
		s.reply("-ERR [AUTH] cannot act as another user")
		return nil
	}
	s.login(user, pass)
	return nil
}

// login checks the credentials, locks the maildrop and takes its
// snapshot, entering the TRANSACTION state (RFC 1939 §4). It queues the
// response.
func (s *session) login(user, pass string) {
	if s.srv.authn == nil {
		s.reply("-ERR [SYS/TEMP] authentication is not available")
		return
	}
	acct, err := s.srv.authn.Authenticate(s.ctx, user, pass, s.remoteIP)
	if err != nil {
		s.authFailed(user, err)
		return
	}
	s.enter(acct)
}

// authFailed counts a failed login and queues the reply for err (from
// internal/auth, which logged the failure at warn level).
func (s *session) authFailed(user string, err error) {
	s.failed++
	s.log.Info("pop3 authentication failed", "user", user, "err", err)
	metrics.AuthFailures.With(metrics.ProtoPOP3).Inc()
	switch {
	case errors.Is(err, auth.ErrRateLimited):
		// Temporary: a later attempt may succeed (RFC 3206 §4).
		s.reply("-ERR [SYS/TEMP] too many failed logins, try again later")
	case errors.Is(err, auth.ErrInvalidCredentials):
		s.reply("-ERR [AUTH] authentication failed")
	default:
		// The store or the server failed, not the credentials.
		s.internalError()
		s.reply("-ERR [SYS/TEMP] authentication is temporarily unavailable")
	}
}

// enter locks the maildrop of an authenticated account and takes its
// snapshot, entering the TRANSACTION state (RFC 1939 §4). It queues the
// response.
func (s *session) enter(acct store.Account) {
	// RFC 2449 §8.1.1: [IN-USE] when another session holds the maildrop.
	if !s.srv.locks.acquire(acct.ID) {
		s.log.Info("pop3 maildrop in use", "account", acct.Address)
		s.reply("-ERR [IN-USE] maildrop already locked by another session")
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	defer cancel()
	drop, err := loadMaildrop(ctx, s.srv.st, acct.ID)
	if err != nil {
		s.srv.locks.release(acct.ID)
		s.log.Error("pop3 opening maildrop", "account", acct.Address, "err", err)
		s.internalError()
		s.reply("-ERR [SYS/TEMP] cannot open maildrop, try again later")
		return
	}
	s.acct = acct
	s.drop = drop
	s.state = stateTransaction
	s.failed = 0
	s.log = s.log.With("account", acct.Address)
	n, size := drop.stat()
	s.log.Info("pop3 login", "messages", n)
	metrics.Logins.With(metrics.ProtoPOP3).Inc()
	s.reply(fmt.Sprintf("+OK maildrop locked and ready (%d messages, %d octets)", n, size))
}
