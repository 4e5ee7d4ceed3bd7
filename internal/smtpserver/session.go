package smtpserver

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"pimail/internal/dnsbl"
	"pimail/internal/netserve"
	"pimail/internal/store"
)

// role is what differs between the MX and submission: the rest of a
// session is the same code.
type role interface {
	// greet sends the greeting; false ends the session (the MX's pregreet
	// test).
	greet(s *session) bool
	// authMechanisms are the SASL mechanisms EHLO offers now (none on
	// the MX, none before TLS on submission).
	authMechanisms(s *session) []string
	// auth runs AUTH (RFC 4954).
	auth(s *session, args []byte)
	// mail and rcpt check a sender and a recipient; nil accepts.
	mail(s *session, from string, p mailParams) *reply
	rcpt(s *session, to string) *reply
	// dataPrefix is what goes on top of the message before its data (the
	// MX's Received field).
	dataPrefix(s *session, id string) string
	// deliver takes a complete message and returns the final reply.
	deliver(s *session, id string, sp *spool, fr *framer) *reply
	// refused counts a refused recipient or message (and the MX records
	// it in the delivery log).
	refused(s *session, reason string, r *reply, messageID, subject string, rcpts ...string)
}

// session is one SMTP session, from the greeting to QUIT. A new session
// state starts after STARTTLS (RFC 3207 §4.2).
type session struct {
	srv *Server
	c   *conn
	ip  netip.Addr
	tls *tls.ConnectionState

	helo   string
	esmtp  bool
	errors int
	quit   bool

	// The transaction (RFC 5321 §3.3), cleared by RSET, EHLO, HELO and the
	// end of a message.
	inMail bool
	from   string
	params mailParams
	rcpts  []string
	bdat   *bdatState

	// MX: the blocklist lookup started at connect, and its verdict once
	// consumed (at the first RCPT).
	pending        *dnsbl.Pending
	verdict        dnsbl.Verdict
	verdictKnown   bool
	countedBlocked bool

	// Submission: the logged-in account, and the recipients elsewhere.
	acct   *store.Account
	remote []string
}

// tlsHandshakeTimeout bounds a TLS handshake, implicit or after STARTTLS.
const tlsHandshakeTimeout = time.Minute

// serveConn runs one session (netserve calls it in the connection's
// goroutine, within the connection limits, and closes nc after).
func (srv *Server) serveConn(nc net.Conn) {
	s := &session{srv: srv, ip: netserve.AddrOf(nc.RemoteAddr())}
	if tc, ok := nc.(*tls.Conn); ok { // implicit TLS (RFC 8314 §3.3)
		if !s.handshake(tc) {
			nc.Close()
			return
		}
	}
	s.c = newConn(nc, srv.cfg.ReadTimeout, srv.cfg.WriteTimeout)
	defer func() {
		s.reset()
		s.c.nc.Close() // the TLS connection after STARTTLS
		s.c.release()
	}()
	if !srv.role.greet(s) {
		return
	}
	s.loop()
}

// handshake runs a TLS handshake within its timeout.
func (s *session) handshake(tc *tls.Conn) bool {
	_ = tc.SetDeadline(time.Now().Add(min(tlsHandshakeTimeout, s.srv.cfg.ReadTimeout)))
	if err := tc.Handshake(); err != nil {
		s.srv.log.Debug("TLS handshake failed", "ip", s.ip, "err", err)
		return false
	}
	_ = tc.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	s.tls = &st
	return true
}

// loop reads and answers commands until QUIT, an error or a timeout.
func (s *session) loop() {
	cfg := &s.srv.cfg
	for !s.quit && s.c.err == nil {
		line, err := s.c.readLine(cfg.MaxLineLength)
		if err != nil {
			switch {
			case errors.Is(err, errLineTooLong):
				s.c.reply(replyLineTooLong)
			case isTimeout(err):
				s.c.reply(replyTimeout)
			}
			s.quit = true
			break
		}
		s.command(line)
	}
	_ = s.c.flush()
}

// command dispatches one command line (RFC 5321 §4.1.1).
func (s *session) command(line []byte) {
	verb, args := splitCommand(line)
	if len(verb) > 8 {
		s.fail(replyUnknownCommand)
		return
	}
	var v [8]byte
	for i, c := range verb {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		v[i] = c
	}
	switch string(v[:len(verb)]) {
	case "EHLO":
		s.hello(args, true)
	case "HELO":
		s.hello(args, false)
	case "MAIL":
		s.mail(args)
	case "RCPT":
		s.rcpt(args)
	case "DATA":
		s.data(args)
	case "BDAT":
		s.bdatCommand(args)
	case "RSET":
		s.reset()
		s.c.reply(replyReset)
	case "NOOP":
		s.c.reply(replyNoop)
	case "QUIT":
		s.c.reply(replyBye)
		s.quit = true
	case "VRFY":
		s.c.reply(replyVRFY)
	case "HELP":
		s.c.reply(replyHelp)
	case "STARTTLS":
		s.startTLS(args)
	case "AUTH":
		if s.helo == "" {
			s.fail(replyHeloFirst)
			return
		}
		s.srv.role.auth(s, args)
	case "EXPN", "TURN", "ETRN", "ATRN":
		s.fail(replyNotImpl)
	default:
		s.fail(replyUnknownCommand)
	}
}

// fail answers a refused command and counts it. Beyond MaxErrors the
// session ends with 421 (RFC 5321 §3.8): a directory harvest, a bounce
// flood or a confused client stops here, and nothing it pipelined after
// runs.
func (s *session) fail(r *reply) {
	s.errors++
	if s.errors > s.srv.cfg.MaxErrors {
		s.srv.log.Info("too many errors; closing session", "ip", s.ip, "errors", s.errors)
		s.c.reply(replyTooManyErrors)
		s.quit = true
		return
	}
	s.c.reply(r)
}

// answer sends r: as a refusal (counted) unless it is a success.
func (s *session) answer(r *reply) {
	if r.code >= 400 {
		s.fail(r)
		return
	}
	s.c.reply(r)
}

// hello runs EHLO and HELO (RFC 5321 §4.1.1.1): a new session state, and
// for EHLO the extensions.
func (s *session) hello(args []byte, ehlo bool) {
	name, _, _ := bytes.Cut(args, []byte(" "))
	if len(name) == 0 {
		s.fail(replyHeloSyntax)
		return
	}
	s.reset()
	s.helo, s.esmtp = string(name), ehlo
	if !ehlo {
		s.c.reply(newReply(250, [3]int{2, 0, 0}, s.srv.cfg.Hostname))
		return
	}
	starttls := s.tls == nil && s.srv.cfg.TLS != nil
	auth := len(s.srv.role.authMechanisms(s)) > 0
	s.c.out = append(s.c.out, s.srv.ehlo[b2i(starttls)][b2i(auth)]...)
}

// ehloReplies builds EHLO's reply (RFC 5321 §4.1.1.1) once per server, for
// each combination of STARTTLS and AUTH offered: [starttls][auth].
func ehloReplies(cfg *Config) (r [2][2][]byte) {
	for starttls := range 2 {
		for auth := range 2 {
			lines := []string{cfg.Hostname, "PIPELINING", "8BITMIME", "ENHANCEDSTATUSCODES", "CHUNKING", "SMTPUTF8",
				"SIZE " + strconv.FormatInt(cfg.MaxMessageBytes, 10),
				"LIMITS RCPTMAX=" + strconv.Itoa(cfg.MaxRecipients)} // RFC 9422
			if starttls == 1 {
				lines = append(lines, "STARTTLS")
			}
			if auth == 1 {
				lines = append(lines, "AUTH "+strings.Join(mechanisms, " "))
			}
			c := conn{}
			c.replyLines(250, lines)
			r[starttls][auth] = c.out
		}
	}
	return r
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reset ends the transaction (RSET, RFC 5321 §4.1.1.5).
func (s *session) reset() {
	s.inMail, s.from, s.params = false, "", mailParams{}
	s.rcpts, s.remote = s.rcpts[:0], s.remote[:0]
	if s.bdat != nil { // a BDAT transaction given up (RSET, EHLO, the end of the session)
		s.bdat.sp.discard(s.bdat.fr.out)
		s.bdat = nil
	}
}

// mail runs MAIL FROM (RFC 5321 §4.1.1.2).
func (s *session) mail(args []byte) {
	switch {
	case s.helo == "":
		s.fail(replyHeloFirst)
		return
	case s.inMail:
		s.fail(replyNestedMail)
		return
	}
	from, params, ok := parsePathArg(args, "FROM:", true)
	if !ok {
		s.fail(replySyntax)
		return
	}
	p, r := parseMailParams(params)
	switch {
	case r != nil:
		s.fail(r)
		return
	case p.size > s.srv.cfg.MaxMessageBytes: // RFC 1870 §6.2
		s.fail(replyTooBig)
		return
	case !p.utf8 && !isASCII(from):
		s.fail(replyNeedUTF8)
		return
	}
	if r := s.srv.role.mail(s, from, p); r != nil {
		s.fail(r)
		return
	}
	s.inMail, s.from, s.params = true, from, p
	s.c.reply(replySenderOK)
}

// rcpt runs RCPT TO (RFC 5321 §4.1.1.3).
func (s *session) rcpt(args []byte) {
	if !s.inMail {
		s.fail(replyMailFirst)
		return
	}
	to, params, ok := parsePathArg(args, "TO:", false)
	switch {
	case !ok:
		s.fail(replySyntax)
		return
	case len(bytes.TrimSpace(params)) > 0: // no RCPT parameters without DSN
		s.fail(replyParam)
		return
	case !s.params.utf8 && !isASCII(to):
		s.fail(replyNeedUTF8)
		return
	case len(s.rcpts)+len(s.remote) >= s.srv.cfg.MaxRecipients:
		// RFC 5321 §4.5.3.1.10: 452, and the client sends the rest later.
		s.c.reply(replyTooManyRcpts)
		return
	}
	if r := s.srv.role.rcpt(s, to); r != nil {
		s.fail(r)
		return
	}
	s.c.reply(replyRcptOK)
}

// startTLS runs STARTTLS (RFC 3207): the handshake, then a session that
// knows nothing from before it (§4.2), and no command the client sent
// behind STARTTLS in plain text runs.
func (s *session) startTLS(args []byte) {
	switch {
	case s.tls != nil:
		s.fail(replyAlreadyTLS)
		return
	case s.srv.cfg.TLS == nil:
		s.fail(replyNoTLS)
		return
	case len(args) > 0:
		s.fail(replySyntax)
		return
	}
	s.c.reply(replyStartTLS)
	if s.c.flush() != nil {
		return
	}
	s.c.discardInput()
	tc := tls.Server(s.c.nc, s.srv.cfg.TLS)
	if !s.handshake(tc) {
		s.quit = true
		s.c.err = net.ErrClosed
		return
	}
	s.c.nc, s.c.rdl, s.c.wdl = tc, time.Time{}, time.Time{}
	s.reset()
	s.helo, s.esmtp, s.acct = "", false, nil
}

// receivedInfo describes this session for the Received field.
func (s *session) receivedInfo(id string) receivedInfo {
	ri := receivedInfo{
		helo: s.helo, remoteIP: s.ip.String(), hostname: s.srv.cfg.Hostname, id: id,
		utf8: s.params.utf8, esmtp: s.esmtp, tls: s.tls, rcpts: s.rcpts, date: time.Now(),
	}
	if s.acct != nil {
		ri.user = s.acct.Address
		ri.rcpts = nil // a submission's recipients stay out of its copies
	}
	return ri
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
