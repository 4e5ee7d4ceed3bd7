package smtpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"pimail/internal/auth"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

// SASL mechanisms (RFC 4616 PLAIN, draft-murchison-sasl-login LOGIN,
// RFC 7677 SCRAM-SHA-256), strongest first.
var mechanisms = []string{auth.MechSCRAMSHA256, "PLAIN", "LOGIN"}

var (
	replyAuthOK        = newReply(235, [3]int{2, 7, 0}, "Authentication successful")
	replyAuthFailed    = newReply(535, [3]int{5, 7, 8}, "Authentication credentials invalid")
	replyAuthLimited   = newReply(454, [3]int{4, 7, 0}, "Too many failed logins, try again later")
	replyAuthTemp      = newReply(454, [3]int{4, 7, 0}, "Temporary authentication failure")
	replyNeedTLS       = newReply(530, [3]int{5, 7, 0}, "Must issue a STARTTLS command first")
	replyNoMech        = newReply(504, [3]int{5, 5, 4}, "Unrecognized authentication type")
	replyAuthCancelled = newReply(501, [3]int{5, 0, 0}, "Authentication cancelled")
	replyAuthSyntax    = newReply(501, [3]int{5, 5, 2}, "Invalid base64 or SASL message")
	replyAuthAgain     = newReply(503, [3]int{5, 5, 1}, "Already authenticated")
	replyAuthInMail    = newReply(503, [3]int{5, 5, 1}, "AUTH not allowed during a mail transaction")
)

// authAllowed: AUTH only over TLS, or from loopback when configured
// (RFC 4954 §4: mechanisms that send passwords need a protected channel).
func (r submissionRole) authAllowed(s *session) bool {
	return s.tls != nil || r.srv.cfg.InsecureLoopbackAuth && s.ip.IsLoopback()
}

func (r submissionRole) authMechanisms(s *session) []string {
	if !r.authAllowed(s) {
		return nil
	}
	return mechanisms
}

// errCancelled: the client answered a challenge with "*" (RFC 4954 §4).
var errCancelled = errors.New("authentication cancelled")

// auth runs AUTH mechanism [initial-response] (RFC 4954 §4). Every check
// of a password or proof goes through internal/auth, which throttles
// failed logins per client address and per account, and logs them.
func (r submissionRole) auth(s *session, args []byte) {
	switch {
	case s.acct != nil:
		s.fail(replyAuthAgain)
		return
	case s.inMail:
		s.fail(replyAuthInMail)
		return
	case !r.authAllowed(s):
		s.fail(replyNeedTLS)
		return
	}
	mech, initial, hasInitial := bytes.Cut(args, []byte(" "))
	var resp []byte
	if hasInitial {
		if string(initial) != "=" { // "=": an empty initial response
			var err error
			if resp, err = base64.StdEncoding.DecodeString(string(initial)); err != nil {
				s.fail(replyAuthSyntax)
				return
			}
		}
	}
	var acct store.Account
	var err error
	switch strings.ToUpper(string(mech)) {
	case "PLAIN":
		acct, err = r.plain(s, resp, hasInitial)
	case "LOGIN":
		acct, err = r.login(s, resp, hasInitial)
	case auth.MechSCRAMSHA256:
		acct, err = r.scram(s, resp, hasInitial)
	default:
		s.fail(replyNoMech)
		return
	}
	if err != nil {
		s.fail(r.authError(s, err))
		return
	}
	s.acct = &acct
	r.srv.log.Info("authenticated", "ip", s.ip, "user", acct.Address)
	metrics.Logins.With(metrics.ProtoSubmission).Inc()
	s.c.reply(replyAuthOK)
}

// authError maps a failed exchange to its reply.
func (r submissionRole) authError(s *session, err error) *reply {
	metrics.AuthFailures.With(metrics.ProtoSubmission).Inc()
	switch {
	case errors.Is(err, errCancelled):
		return replyAuthCancelled
	case errors.Is(err, errSASLSyntax):
		return replyAuthSyntax
	case errors.Is(err, auth.ErrRateLimited):
		return replyAuthLimited
	case errors.Is(err, auth.ErrInvalidCredentials):
		return replyAuthFailed
	default:
		r.srv.log.Error("authentication error", "ip", s.ip, "err", err)
		return replyAuthTemp
	}
}

var errSASLSyntax = errors.New("invalid SASL message")

// challenge sends a 334 challenge (base64) and returns the decoded answer.
func (s *session) challenge(text []byte) ([]byte, error) {
	s.c.raw("334 " + base64.StdEncoding.EncodeToString(text) + "\r\n")
	line, err := s.c.readLine(s.srv.cfg.MaxLineLength)
	if err != nil {
		s.quit = true
		return nil, err
	}
	if string(line) == "*" {
		return nil, errCancelled
	}
	b, err := base64.StdEncoding.DecodeString(string(line))
	if err != nil {
		return nil, errSASLSyntax
	}
	return b, nil
}

// check asks internal/auth about a user name and password.
func (r submissionRole) check(s *session, user, pass string) (store.Account, error) {
	ctx, cancel := context.WithTimeout(r.srv.ctx, time.Minute)
	defer cancel()
	return r.srv.deps.Auth.Authenticate(ctx, user, pass, s.ip.String())
}

// plain: [authzid] NUL authcid NUL passwd (RFC 4616 §2).
func (r submissionRole) plain(s *session, resp []byte, hasInitial bool) (store.Account, error) {
	if !hasInitial {
		var err error
		if resp, err = s.challenge(nil); err != nil {
			return store.Account{}, err
		}
	}
	parts := bytes.Split(resp, []byte{0})
	if len(parts) != 3 {
		return store.Account{}, errSASLSyntax
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	// An authorization identity other than the user's own would mean
	// acting for someone else.
	if authz != "" && !strings.EqualFold(authz, user) {
		return store.Account{}, r.srv.deps.Auth.Refuse(user, s.ip.String(), "authorization identity differs")
	}
	return r.check(s, user, pass)
}

// login: "Username:" and "Password:" challenges; an initial response is
// the user name.
func (r submissionRole) login(s *session, resp []byte, hasInitial bool) (store.Account, error) {
	user := resp
	if !hasInitial {
		var err error
		if user, err = s.challenge([]byte("Username:")); err != nil {
			return store.Account{}, err
		}
	}
	pass, err := s.challenge([]byte("Password:"))
	if err != nil {
		return store.Account{}, err
	}
	return r.check(s, string(user), string(pass))
}

// scram runs SCRAM-SHA-256 (RFC 5802, RFC 7677) over internal/auth's
// exchange, shared with IMAP and POP3. The server-final message goes out
// as a last 334 challenge, which the client answers with an empty line
// (RFC 4954 §4).
func (r submissionRole) scram(s *session, resp []byte, hasInitial bool) (store.Account, error) {
	sc, err := r.srv.deps.Auth.NewSCRAM(s.ip.String())
	if err != nil {
		return store.Account{}, err
	}
	if !hasInitial {
		if resp, err = s.challenge(nil); err != nil {
			sc.Abort()
			return store.Account{}, err
		}
	}
	for {
		ctx, cancel := context.WithTimeout(r.srv.ctx, time.Minute)
		out, done, err := sc.Next(ctx, resp)
		cancel()
		if err != nil {
			return store.Account{}, err
		}
		resp, err = s.challenge(out)
		if err != nil {
			sc.Abort()
			return store.Account{}, err
		}
		if done {
			if len(resp) != 0 {
				sc.Abort()
				return store.Account{}, errSASLSyntax
			}
			acct, _ := sc.Account()
			return acct, nil
		}
	}
}
