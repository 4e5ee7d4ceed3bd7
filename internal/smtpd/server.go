// Package smtpd is pimail's inbound SMTP server (the MX on port 25): it
// speaks ESMTP (RFC 5321) with PIPELINING, 8BITMIME, SMTPUTF8, CHUNKING,
// SIZE, ENHANCEDSTATUSCODES and STARTTLS, checks every recipient at RCPT
// against the in-memory directory, and hands complete messages to the
// delivery pipeline. It never relays: recipients outside the local domains
// are refused.
//
// The protocol grammar and state machine come from github.com/emersion/go-smtp;
// this package is the policy: limits, timeouts, recipient checks, trace
// fields, SMTP smuggling defence and reply codes.
//
// Nothing expensive happens before trust (DESIGN principle 1): a session
// costs a goroutine and a few buffers until it has a valid recipient and a
// complete message; only then is the message parsed and stored. Before a
// session even starts, each connection passes a gate (gate.go): the total
// and per-client connection limits and the per-client connection rate
// (421 4.7.0), the start of its blocklist lookup (internal/dnsbl, answered
// at RCPT) and the pregreet test (554 5.7.1 for a client that talks
// before the greeting).
package smtpd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"pimail/internal/delivery"
	"pimail/internal/deliverylog"
	"pimail/internal/directory"
	"pimail/internal/dnsbl"
	"pimail/internal/netserve"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxMessageBytes = 50 << 20 // 50 MiB
	DefaultMaxRecipients   = 100      // RFC 5321 §4.5.3.1.8: at least 100 must be accepted
	// DefaultMaxLineLength bounds one line, command or message text. It is
	// far above RFC 5321's 512 (commands, §4.5.3.1.4) and 1000 (text lines,
	// §4.5.3.1.6) because real mail has longer lines, and far below any
	// size that costs memory: a longer line closes the connection with 500.
	DefaultMaxLineLength = 64 << 10
	// RFC 5321 §4.5.3.2.7: a server SHOULD wait at least 5 minutes for
	// the next command.
	DefaultReadTimeout  = 5 * time.Minute
	DefaultWriteTimeout = 5 * time.Minute
	// RFC 5321 §4.5.3.2.5: 3 minutes for each block of message data.
	DefaultDataTimeout = 3 * time.Minute
	// DefaultDeliverTimeout bounds the work after the final "." — the
	// client waits 10 minutes for the reply (RFC 5321 §4.5.3.2.6), so the
	// server must answer well before that or the message is sent twice.
	DefaultDeliverTimeout = 5 * time.Minute
	// DefaultMaxErrors is how many rejected commands (unknown recipients,
	// relay attempts, rejected messages) a session may collect before it
	// is closed with 421: a directory harvest or bounce flood ends early.
	DefaultMaxErrors = 20

	// DefaultMaxConnections bounds concurrent connections to the server.
	// A session costs a goroutine and a few buffers, so the bound is
	// about overload, not memory: a flood gets 421 instead of a slower
	// server for everyone.
	DefaultMaxConnections = 300
	// DefaultMaxConnectionsPerIP bounds concurrent connections from one
	// client (an IPv4 address or an IPv6 /64). Large senders open a few
	// parallel connections; a bot farm behind one address gets 421.
	DefaultMaxConnectionsPerIP = 10
	// DefaultConnectionRate is how many connections one client may open
	// per DefaultConnectionRateWindow.
	DefaultConnectionRate       = 60
	DefaultConnectionRateWindow = time.Minute
	// DefaultPregreetWait is how long the server waits, after the first
	// line of its greeting, for a client to stay silent (see
	// Config.PregreetWait for the trade-off).
	DefaultPregreetWait = 300 * time.Millisecond
	// DefaultDNSBLThreshold is the blocklist score at which RCPT is refused.
	DefaultDNSBLThreshold = 1.0
)

// maxDNSBLWait is a last bound on the wait for a blocklist verdict at
// RCPT; the checker's own timeout normally ends it much sooner.
const maxDNSBLWait = 30 * time.Second

// shutdownGrace bounds how long Close waits for deliveries already handed
// to the store, so that a message whose commit is under way is not cut off.
const shutdownGrace = 10 * time.Second

// Config is the inbound SMTP server's configuration. Every zero field
// means its documented default.
type Config struct {
	// Hostname is the server's name in the banner, EHLO reply and
	// Received fields; default os.Hostname().
	Hostname string
	// MaxMessageBytes is the largest message accepted (advertised as
	// SIZE, RFC 1870); larger ones get 552 5.3.4. Default 50 MiB.
	MaxMessageBytes int64
	// MaxRecipients per transaction; more get 452 4.5.3. Default 100.
	MaxRecipients int
	// MaxLineLength is the longest line accepted, command or message
	// text, in bytes; longer closes the connection. Default 64 KiB.
	MaxLineLength int
	// ReadTimeout is how long to wait for a command; default 5 minutes.
	ReadTimeout time.Duration
	// WriteTimeout is how long a reply may take to send; default 5 minutes.
	WriteTimeout time.Duration
	// DataTimeout is how long to wait for each block of message data;
	// default 3 minutes.
	DataTimeout time.Duration
	// DeliverTimeout bounds storing a complete message; default 5 minutes.
	DeliverTimeout time.Duration
	// TLS enables STARTTLS (RFC 3207) when set.
	TLS *tls.Config
	// MaxErrors is how many rejected commands a session may have before it
	// is closed with 421; default 20.
	MaxErrors int

	// MaxConnections bounds concurrent connections (default 300),
	// MaxConnectionsPerIP those from one client, an IPv4 address or an
	// IPv6 /64 (default 10). Over either, the client gets
	// "421 4.7.0" in place of the greeting. Negative: no limit.
	MaxConnections      int
	MaxConnectionsPerIP int
	// ConnectionRate is how many connections a client may open per
	// ConnectionRateWindow (defaults 60 per minute); more get 421 4.7.0.
	// Refused attempts count too. Negative: no limit.
	ConnectionRate       int
	ConnectionRateWindow time.Duration
	// PregreetWait is how long the server waits after the first line of a
	// multi-line greeting ("220-host ESMTP") before it sends the rest: a
	// client that sends anything in that time gets 554 5.7.1 and is
	// dropped (RFC 5321 §4.3.1: the client waits for the greeting).
	// Default 300 ms; negative disables the test.
	//
	// The trade-off: every client, legitimate or not, waits this long
	// for its greeting, and each connection is held that long before any
	// SMTP is spoken. Postfix's postscreen waits 6 s, which catches more
	// slow ratware; 300 ms catches the bots that do not wait at all or
	// read only the first greeting line, costs a conforming sender
	// nothing it would notice, and overlaps the blocklist lookup, which
	// starts at connect.
	PregreetWait time.Duration
	// ExemptNetworks skip the per-client limits, the rate limit and the
	// pregreet test (not the total limit, and not blocklist checks).
	// Loopback clients are exempt too unless LimitLoopback is set: local
	// tools and benchmarks connect from there.
	ExemptNetworks []netip.Prefix
	LimitLoopback  bool
	// DNSBL checks every client's address when it connects; nil: no
	// blocklist checks. A client whose score reaches DNSBLThreshold
	// (default 1) is refused at RCPT with 554 5.7.1. A lookup that does
	// not answer within the checker's timeout counts as "not listed".
	DNSBL          *dnsbl.Checker
	DNSBLThreshold float64

	// DeliveryLog records refused recipients and messages for the admin;
	// nil records nothing. Accepted mail is recorded by the pipeline.
	DeliveryLog *deliverylog.Logger
}

func (c *Config) setDefaults() {
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
		if c.Hostname == "" {
			c.Hostname = "localhost"
		}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxRecipients <= 0 {
		c.MaxRecipients = DefaultMaxRecipients
	}
	if c.MaxLineLength <= 0 {
		c.MaxLineLength = DefaultMaxLineLength
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.DataTimeout <= 0 {
		c.DataTimeout = DefaultDataTimeout
	}
	if c.DeliverTimeout <= 0 {
		c.DeliverTimeout = DefaultDeliverTimeout
	}
	if c.MaxErrors <= 0 {
		c.MaxErrors = DefaultMaxErrors
	}
	defaultInt(&c.MaxConnections, DefaultMaxConnections)
	defaultInt(&c.MaxConnectionsPerIP, DefaultMaxConnectionsPerIP)
	defaultInt(&c.ConnectionRate, DefaultConnectionRate)
	if c.ConnectionRateWindow <= 0 {
		c.ConnectionRateWindow = DefaultConnectionRateWindow
	}
	if c.PregreetWait == 0 {
		c.PregreetWait = DefaultPregreetWait
	}
	if c.DNSBLThreshold <= 0 {
		c.DNSBLThreshold = DefaultDNSBLThreshold
	}
}

// defaultInt sets a zero limit to its default; a negative one stays
// negative and means "no limit".
func defaultInt(v *int, def int) {
	if *v == 0 {
		*v = def
	}
}

// Server is an inbound SMTP server. It is safe for concurrent use; one
// Server may serve several listeners.
type Server struct {
	cfg    Config
	dir    *directory.View
	pipe   *delivery.Pipeline
	logger *slog.Logger
	smtp   *smtp.Server

	// ctx is the parent of every delivery; cancelled at the end of Close.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup // deliveries handed to the pipeline

	limits *netserve.Limiter
	stats  counters
}

// New returns a server that checks recipients with dir and delivers with
// pipe. Serve starts it on a listener.
func New(cfg Config, dir *directory.View, pipe *delivery.Pipeline, logger *slog.Logger) *Server {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{cfg: cfg, dir: dir, pipe: pipe, logger: logger}
	s.limits = netserve.NewLimiter(cfg.MaxConnections, cfg.MaxConnectionsPerIP, cfg.ConnectionRate, cfg.ConnectionRateWindow)
	s.ctx, s.cancel = context.WithCancel(context.Background())

	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = cfg.Hostname
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.MaxLineLength = cfg.MaxLineLength
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	srv.EnableSMTPUTF8 = true
	// No AUTH on this listener: sessions do not implement smtp.AuthSession,
	// so none is advertised; submission is a separate server.
	srv.AllowInsecureAuth = false
	if cfg.TLS != nil {
		srv.TLSConfig = cfg.TLS.Clone()
	}
	srv.ErrorLog = logAdapter{logger}
	s.smtp = srv
	return s
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("smtpd: server closed")

// Serve accepts connections on ln until Close; it returns nil after Close.
// Each connection passes the connection limits and the pregreet test
// before its SMTP session starts.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return ErrServerClosed
	}
	if err := s.smtp.Serve(newGateListener(s, ln)); err != nil {
		return fmt.Errorf("smtpd: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Close stops accepting, closes every connection, waits (a bounded time)
// for deliveries already handed to the store, and returns. A message whose
// final reply was not sent is not acknowledged, so the sender retries.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.mu.Unlock()

	err := s.smtp.Close()
	if errors.Is(err, smtp.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		s.logger.Warn("deliveries still running at shutdown; cancelling them")
	}
	s.cancel()
	if err != nil {
		return fmt.Errorf("smtpd: close: %w", err)
	}
	return nil
}

// beginDelivery registers a delivery unless the server is closing.
func (s *Server) beginDelivery() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.inflight.Add(1)
	return true
}

func (s *Server) endDelivery() { s.inflight.Done() }

// logAdapter sends go-smtp's internal log lines to slog. They are mostly
// connection errors (resets, failed TLS handshakes) from the open
// internet, so they go to debug; recovered panics go to error.
type logAdapter struct{ l *slog.Logger }

func (a logAdapter) Printf(format string, v ...any) {
	a.log(fmt.Sprintf(format, v...))
}

func (a logAdapter) Println(v ...any) {
	a.log(strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

func (a logAdapter) log(msg string) {
	if strings.HasPrefix(msg, "panic") {
		a.l.Error("smtp session panic", "detail", msg)
		return
	}
	a.l.Debug("smtp connection", "detail", msg)
}
