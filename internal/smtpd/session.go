package smtpd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"pimail/internal/delivery"
	"pimail/internal/deliverylog"
	"pimail/internal/directory"
	"pimail/internal/dnsbl"
	"pimail/internal/metrics"
	"pimail/internal/smtpdata"
	"pimail/internal/store"
)

// maxSizeHint caps the buffer allocated up front from MAIL's SIZE=;
// noSizeHint is the buffer's first size when MAIL had no SIZE=.
const (
	maxSizeHint     = 1 << 20
	noSizeHint      = 16 << 10
	maxPooledBuffer = 256 << 10 // larger message buffers are not kept
)

// session is one SMTP session, from EHLO/HELO to QUIT (a new one starts
// after STARTTLS, RFC 3207 §4.2). go-smtp calls its methods from one
// goroutine at a time.
type session struct {
	srv      *Server
	conn     *smtp.Conn
	remoteIP string
	log      *slog.Logger

	// Current transaction (RFC 5321 §3.3), cleared by MAIL, RSET and the
	// end of data.
	from    string
	utf8    bool
	sizeArg int64
	rcpts   []string

	errors  int  // rejected commands in this session
	closing bool // MaxErrors exceeded: every command gets 421

	// The blocklist lookup started at connect, and its verdict once
	// consumed (at the first RCPT).
	pending        *dnsbl.Pending
	verdict        dnsbl.Verdict
	verdictKnown   bool
	countedBlocked bool
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	ip := remoteIP(c.Conn().RemoteAddr())
	sess := &session{
		srv:      s,
		conn:     c,
		remoteIP: ip,
		log:      s.logger.With("ip", ip),
	}
	if gc := gatedOf(c.Conn()); gc != nil {
		sess.pending = gc.reputation
	} else if s.cfg.DNSBL != nil {
		// Not from the gate (implicit TLS): start the lookup now.
		sess.pending = s.cfg.DNSBL.Start(addrOf(c.Conn().RemoteAddr()))
	}
	_, isTLS := c.TLSConnectionState()
	sess.log.Debug("smtp session", "helo", c.Hostname(), "tls", isTLS)
	return sess, nil
}

// Mail starts a transaction. The SIZE parameter was already checked
// against MaxMessageBytes by go-smtp (RFC 1870 §6.2: 552 5.3.4).
func (s *session) Mail(from string, opts *smtp.MailOptions) error {
	if s.closing {
		return replyTooManyErrors
	}
	s.Reset()
	s.from = from
	if opts != nil {
		s.utf8 = opts.UTF8
		s.sizeArg = opts.Size
	}
	return nil
}

// Rcpt checks one recipient against the in-memory directory at once: an
// unknown user gets 550 5.1.1 and the session goes on (RFC 5321 §3.3).
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.closing {
		return replyTooManyErrors
	}
	// The blocklist verdict comes first, so a listed client learns
	// nothing about which recipients exist.
	if blocked, reply := s.blocklisted(); blocked {
		s.log.Debug("recipient refused: client blocklisted", "rcpt", to)
		s.refused(metrics.RejectDNSBL, reply, "", "", to)
		return s.fail(reply)
	}
	// The pipeline's resolution: the directory, and the SRS addresses
	// of bounces to forwarded mail.
	res, err := s.srv.pipe.Resolve(to)
	if err == nil && len(res.Accounts) == 0 && !s.srv.pipe.Forwards() {
		// Only remote forwarding targets, and forwarding is off: a
		// temporary refusal keeps the message with the sender.
		s.log.Warn("recipient forwards only to remote targets, which is not configured", "rcpt", to)
		s.refused(metrics.RejectTempFail, replyTempFailure, "", "", to)
		return s.fail(replyTempFailure)
	}
	if err != nil {
		reply := rcptError(err)
		if reply == replyTempFailure {
			s.log.Warn("recipient check failed", "rcpt", to, "err", err)
		} else {
			s.log.Debug("recipient refused", "rcpt", to, "code", reply.Code)
		}
		reason := metrics.RejectUnknownRecipient
		if errors.Is(err, directory.ErrNotLocalDomain) {
			reason = metrics.RejectRelay
		}
		s.refused(reason, reply, "", "", to)
		return s.fail(reply)
	}
	// A full mailbox refuses its recipient only (RFC 5321 §3.3), so the
	// others of the transaction still get the message.
	if err := s.srv.pipe.CheckQuota(s.srv.ctx, to, s.sizeArg); err != nil {
		reply := deliveryError(err)
		s.refused(metrics.RejectOther, reply, "", "", to)
		return s.fail(reply)
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

// fail counts a rejected command. Beyond MaxErrors the session ends: the
// reply becomes 421 (RFC 5321 §3.8) and the read side of the connection is
// shut, so go-smtp closes the connection after answering whatever the
// client already pipelined.
func (s *session) fail(reply *smtp.SMTPError) error {
	s.errors++
	if s.errors <= s.srv.cfg.MaxErrors {
		return reply
	}
	if !s.closing {
		s.closing = true
		s.log.Info("too many errors; closing session", "errors", s.errors)
		shutdownRead(s.conn.Conn())
	}
	return replyTooManyErrors
}

// Data receives the message, checks it, and delivers it. The reply is 250
// only after the store has the message on disk (RFC 5321 §6.1).
func (s *session) Data(r io.Reader) error {
	if s.closing {
		return replyTooManyErrors
	}
	if !s.srv.beginDelivery() {
		return replyShuttingDown
	}
	defer s.srv.endDelivery()

	cfg := &s.srv.cfg
	id := delivery.NewID()
	tlsState, isTLS := s.conn.TLSConnectionState()
	var st *tls.ConnectionState
	if isTLS {
		st = &tlsState
	}
	hdr := receivedField(receivedInfo{
		helo:     s.conn.Hostname(),
		remoteIP: s.remoteIP,
		hostname: cfg.Hostname,
		id:       id,
		utf8:     s.utf8,
		tls:      st,
		rcpts:    s.rcpts,
		date:     time.Now(),
	})

	// The declared SIZE only sizes the first allocation, capped: a client
	// announcing 50 MiB must not get 50 MiB before it sends anything.
	// Without SIZE the buffer starts small and doubles as needed: 64 KiB
	// up front for every such message was half of all the memory the
	// server allocated under a load of 8 KB messages.
	buf := dataBuffers.Get().(*bytes.Buffer)
	hint := min(s.sizeArg, maxSizeHint, cfg.MaxMessageBytes)
	if hint <= 0 {
		hint = noSizeHint
	}
	buf.Grow(len(hdr) + int(hint))
	buf.WriteString(hdr)
	if err := smtpdata.Read(buf, r, s.conn.Conn(), cfg.DataTimeout, cfg.MaxMessageBytes); err != nil {
		putDataBuffer(buf)
		return s.dataError(id, err)
	}

	env := delivery.Envelope{
		ID:         id,
		MailFrom:   s.from,
		Recipients: s.rcpts,
		RemoteIP:   s.remoteIP,
		Helo:       s.conn.Hostname(),
		TLS:        isTLS,
		DNSBL:      dnsblHits(s.reputation()),
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, cfg.DeliverTimeout)
	defer cancel()
	if _, err := s.srv.pipe.Deliver(ctx, env, buf.Bytes()); err != nil {
		// buf is not reused: a store write given up on (ctx) may still
		// hold it.
		reply := deliveryError(err)
		s.log.Warn("delivery failed", "id", id, "from", s.from, "code", reply.Code, "err", err)
		mid, subj := deliverylog.Identify(buf.Bytes())
		s.refused(metrics.RejectOther, reply, mid, subj, s.rcpts...)
		if reply.Code/100 == 5 {
			return s.fail(reply)
		}
		return reply
	}
	putDataBuffer(buf) // Deliver returned: the message is stored, nothing holds buf
	metrics.MessagesAccepted.With(metrics.ProtoSMTP).Inc()
	return replyAccepted(id)
}

// dataBuffers holds message buffers between transactions: a new one for
// every message was, with its zeroing, a quarter of all the memory the
// server allocated under closed-50.
var dataBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putDataBuffer returns buf to dataBuffers, unless it grew for a large
// message.
func putDataBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledBuffer {
		return
	}
	buf.Reset()
	dataBuffers.Put(buf)
}

// refused counts a refusal and records it in the delivery log, one entry
// per recipient.
func (s *session) refused(reason string, reply *smtp.SMTPError, messageID, subject string, rcpts ...string) {
	metrics.MessagesRejected.With(reason).Inc()
	s.srv.cfg.DeliveryLog.LogEach(store.DeliveryLogEntry{
		Direction: store.DirectionIn, Result: store.ResultRejected,
		MessageID: messageID, Subject: subject, From: s.from, RemoteIP: s.remoteIP,
		Reason: deliverylog.Reply(reply),
	}, rcpts)
}

// dataError maps a failure while reading the message data to its reply.
func (s *session) dataError(id string, err error) error {
	switch {
	case errors.Is(err, smtpdata.ErrTooBig), errors.Is(err, smtp.ErrDataTooLarge):
		s.log.Info("message refused: too big", "id", id, "limit", s.srv.cfg.MaxMessageBytes)
		s.refused(metrics.RejectSize, replyTooBig, "", "", s.rcpts...)
		return s.fail(replyTooBig)
	case errors.Is(err, smtpdata.ErrBareLineEnding):
		s.log.Info("message refused: bare CR or LF (possible SMTP smuggling)", "id", id, "from", s.from)
		s.refused(metrics.RejectProtocol, replyBareLineEnding, "", "", s.rcpts...)
		return s.fail(replyBareLineEnding)
	case errors.Is(err, smtp.ErrTooLongLine):
		// A permanent refusal (RFC 5321 §4.5.3.1.6 and §4.2.5): a retry
		// would send the same line. The rest of the line was not read, so
		// the session cannot continue in step with the client.
		s.log.Info("message refused: line too long", "id", id, "limit", s.srv.cfg.MaxLineLength)
		s.refused(metrics.RejectProtocol, replyLineTooLong, "", "", s.rcpts...)
		s.closing = true
		shutdownRead(s.conn.Conn())
		return replyLineTooLong
	default:
		// The connection broke or timed out mid-message: nothing stored,
		// nothing acknowledged. The stream cannot be brought back in step
		// with the client, so the session ends after this reply.
		s.log.Info("message data not received", "id", id, "err", err)
		s.closing = true
		shutdownRead(s.conn.Conn())
		return replyTempFailure
	}
}

// Reset discards the current transaction (RSET, EHLO, end of data).
func (s *session) Reset() {
	s.from = ""
	s.utf8 = false
	s.sizeArg = 0
	s.rcpts = nil
}

// Logout ends the session.
func (s *session) Logout() error { return nil }

// remoteIP returns the IP of a connection's peer, or the address as text
// when it is not TCP.
func remoteIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// shutdownRead stops reading from the client: go-smtp then sees end of
// input after the buffered commands and closes the connection.
func shutdownRead(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cr, ok := c.(interface{ CloseRead() error }); ok {
		_ = cr.CloseRead()
		return
	}
	_ = c.SetReadDeadline(time.Now())
}
