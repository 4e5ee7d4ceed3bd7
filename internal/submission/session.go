package submission

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-smtp"

	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/smtpdata"
	"pimail/internal/store"
)

var (
	replyAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	replyNotYours     = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Sender address not owned by the authenticated user"}
	replyFromNotYours = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "From: header address not owned by the authenticated user"}
	replyBadAddress   = &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 1, 3}, Message: "Bad recipient address syntax"}
	replyUnknownUser  = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}
	replyTempFailure  = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary local problem, try again later"}
	replyTooBig       = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "Message too big"}
	replyBareLF       = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 11}, Message: "Bare CR or LF in message data"}
	replyBadHeader    = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message header without a valid From: field"}
	replyTooManyErrs  = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many errors, closing connection"}
)

// session is one submission session; a new one starts after STARTTLS
// (go-smtp discards the old one and everything the client pipelined
// before the handshake, RFC 3207 §4.2).
type session struct {
	srv      *Server
	conn     *smtp.Conn
	remoteIP string
	log      *slog.Logger
	acct     *store.Account
	errors   int

	from   string
	local  []string // recipients in local domains
	remote []string // recipients elsewhere, for the queue
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	ip := remoteIP(c.Conn().RemoteAddr())
	return &session{srv: s, conn: c, remoteIP: ip, log: s.log.With("ip", ip)}, nil
}

func (s *session) fail(err *smtp.SMTPError) error {
	s.errors++
	if s.errors > s.srv.cfg.MaxErrors {
		closeRead(s.conn.Conn())
		return replyTooManyErrs
	}
	return err
}

// Mail checks that the sender is the authenticated user's (RFC 6409 §4.3:
// the MSA must authenticate; §8.1 lets it refuse a sender the user may not
// use). The null sender is not for people.
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.Reset()
	if s.acct == nil {
		return s.fail(replyAuthRequired)
	}
	if from == "" || !s.owns(from) {
		s.log.Warn("sender refused", "from", from)
		return s.fail(replyNotYours)
	}
	s.from = from
	return nil
}

// owns reports whether the account may use addr: its own address (also
// with a +detail), or an alias whose targets include it. A catch-all does
// not count: it receives for the domain, it does not send as it.
func (s *session) owns(addr string) bool {
	a := strings.ToLower(strings.TrimSpace(addr))
	if strings.Count(a, "@") != 1 {
		return false
	}
	own := strings.ToLower(s.acct.Address)
	if a == own {
		return true
	}
	local, domain, _ := strings.Cut(a, "@")
	if i := strings.IndexByte(local, '+'); i > 0 && local[:i]+"@"+domain == own {
		return true
	}
	base := a
	if i := strings.IndexByte(local, '+'); i > 0 {
		base = local[:i] + "@" + domain
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, 10*time.Second)
	defer cancel()
	aliases, err := s.srv.deps.Store.Aliases(ctx)
	if err != nil {
		s.log.Error("reading aliases", "err", err)
		return false
	}
	for _, al := range aliases {
		if strings.ToLower(al.Address) != a && strings.ToLower(al.Address) != base {
			continue
		}
		for _, t := range al.Targets {
			if strings.ToLower(t) == own {
				return true
			}
		}
	}
	return false
}

// Rcpt sorts a recipient into local and remote. Only an authenticated
// session gets here with a sender, so relaying to remote domains is for
// users only (never an open relay). Addresses that could be read two ways
// by another server (an '@' in the local part, "%" or "!" routing in a
// local address) are refused.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.acct == nil {
		return s.fail(replyAuthRequired)
	}
	if s.from == "" {
		return s.fail(&smtp.SMTPError{Code: 503, EnhancedCode: smtp.EnhancedCode{5, 5, 1}, Message: "MAIL first"})
	}
	if strings.Count(to, "@") != 1 {
		s.log.Info("recipient refused: ambiguous address", "rcpt", to)
		return s.fail(replyBadAddress)
	}
	local, domain, _ := strings.Cut(to, "@")
	// The %-hack and UUCP bang paths are routing requests that some
	// servers still honour; nobody's real address needs them.
	if local == "" || !validDomain(domain) || strings.ContainsAny(to, " \t\"\\<>()[],;:%!") {
		s.log.Info("recipient refused: bad syntax", "rcpt", to)
		return s.fail(replyBadAddress)
	}
	_, err := s.srv.deps.Dir.Resolve(to)
	switch {
	case errors.Is(err, directory.ErrNotLocalDomain):
		s.remote = append(s.remote, to)
		return nil
	case errors.Is(err, directory.ErrUnknownUser):
		return s.fail(replyUnknownUser)
	case err != nil:
		s.log.Warn("recipient check failed", "rcpt", to, "err", err)
		return replyTempFailure
	}
	s.local = append(s.local, to)
	return nil
}

// Data reads the message, checks its From:, completes its header and
// sends it: local recipients through the pipeline, remote ones into the
// queue, and a copy to Sent. 250 only once all of it is on disk.
func (s *session) Data(r io.Reader) error {
	cfg := &s.srv.cfg
	var buf bytes.Buffer
	if err := smtpdata.Read(&buf, r, s.conn.Conn(), cfg.DataTimeout, cfg.MaxMessageBytes); err != nil {
		switch {
		case errors.Is(err, smtpdata.ErrTooBig), errors.Is(err, smtp.ErrDataTooLarge):
			return s.fail(replyTooBig)
		case errors.Is(err, smtpdata.ErrBareLineEnding):
			return s.fail(replyBareLF)
		}
		s.log.Info("message data not received", "err", err)
		closeRead(s.conn.Conn())
		return replyTempFailure
	}
	froms, ok := headerFrom(buf.Bytes())
	if !ok {
		return s.fail(replyBadHeader)
	}
	for _, f := range froms {
		if !s.owns(f) {
			s.log.Warn("message refused: From: not owned", "from_header", f)
			return s.fail(replyFromNotYours)
		}
	}
	id := delivery.NewID()
	tlsState, isTLS := s.conn.TLSConnectionState()
	raw := completeHeader(buf.Bytes(), cfg.Hostname, time.Now())
	raw = append([]byte(receivedField(s.conn.Hostname(), s.remoteIP, cfg.Hostname, id, s.acct.Address, isTLS, tlsState, time.Now())), raw...)

	ctx, cancel := context.WithTimeout(s.srv.ctx, cfg.DeliverTimeout)
	defer cancel()
	if len(s.remote) > 0 {
		qid, err := s.srv.deps.Queue.Enqueue(ctx, s.acct.ID, s.from, s.remote, raw)
		if err != nil {
			s.log.Error("queueing failed", "id", id, "err", err)
			return replyTempFailure
		}
		s.log.Info("message queued", "id", id, "queue_id", qid, "rcpts", len(s.remote))
	}
	if len(s.local) > 0 {
		env := delivery.Envelope{ID: id, MailFrom: s.from, Recipients: s.local, RemoteIP: s.remoteIP, Helo: s.conn.Hostname(), TLS: isTLS, Authenticated: true}
		if _, err := s.srv.deps.Local.Deliver(ctx, env, raw); err != nil {
			s.log.Error("local delivery failed", "id", id, "err", err)
			if errors.Is(err, delivery.ErrNoRecipients) && len(s.remote) == 0 {
				return s.fail(replyUnknownUser)
			}
			return replyTempFailure
		}
	}
	if !cfg.NoSentCopy {
		s.saveSent(ctx, id, raw)
	}
	s.log.Info("message submitted", "id", id, "from", s.from, "local", len(s.local), "remote", len(s.remote), "size", len(raw))
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: "OK: queued as " + id}
}

// saveSent appends the message to the account's Sent mailbox (the one
// with the \Sent special use, RFC 6154), marked \Seen. A failure is logged:
// the message itself has been sent.
func (s *session) saveSent(ctx context.Context, id string, raw []byte) {
	mbs, err := s.srv.deps.Store.Mailboxes(ctx, s.acct.ID)
	if err != nil {
		s.log.Error("saving to Sent: listing mailboxes", "id", id, "err", err)
		return
	}
	for _, mb := range mbs {
		if mb.SpecialUse == store.SpecialSent {
			if _, err := s.srv.deps.Store.Append(ctx, mb.ID, raw, store.FlagSeen, nil, time.Time{}); err != nil {
				s.log.Error("saving to Sent", "id", id, "err", err)
			}
			return
		}
	}
	s.log.Warn("no Sent mailbox; copy not saved", "id", id)
}

func (s *session) Reset() {
	s.from = ""
	s.local = nil
	s.remote = nil
}

func (s *session) Logout() error { return nil }

// validDomain accepts dot-separated labels of letters, digits and
// hyphens (RFC 5321 §4.1.2 Domain), and non-ASCII labels (SMTPUTF8).
func validDomain(d string) bool {
	if d == "" || len(d) > 255 {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= 0x80 || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
				return false
			}
		}
	}
	return true
}

func remoteIP(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
