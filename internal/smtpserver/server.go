// Package smtpserver is pimail's SMTP server, in two roles:
//
//   - MX (port 25, RFC 5321): mail from the internet for local
//     recipients, each checked at RCPT against the in-memory directory,
//     with blocklists and the pregreet test; never a relay;
//   - submission (ports 587 with STARTTLS and 465 with implicit TLS,
//     RFC 6409, RFC 8314): mail from logged-in users (SASL PLAIN, LOGIN,
//     SCRAM-SHA-256; RFC 4954, RFC 7677) sent as their own addresses, to
//     local recipients through the delivery pipeline and to remote ones
//     through the outbound queue, with a copy in Sent.
//
// Both roles share everything else: the session loop and command parser,
// ESMTP (PIPELINING RFC 2920, 8BITMIME RFC 6152, SMTPUTF8 RFC 6531,
// CHUNKING RFC 3030, SIZE RFC 1870, ENHANCEDSTATUSCODES RFC 2034,
// STARTTLS RFC 3207, LIMITS RFC 9422), the DATA and BDAT framing
// (framing.go: where a message ends, SMTP smuggling refused, bare CR and
// LF normalized), message spooling (spool.go: memory up to a threshold,
// then a file), the connection limits and accept loop (internal/netserve),
// timeouts, the Received field, reply codes and error counting.
//
// Nothing expensive happens before trust (DESIGN principle 1): a session
// costs a goroutine and two small pooled buffers until it has a valid
// recipient and a complete message.
package smtpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"pimail/internal/auth"
	"pimail/internal/delivery"
	"pimail/internal/deliverylog"
	"pimail/internal/directory"
	"pimail/internal/dnsbl"
	"pimail/internal/metrics"
	"pimail/internal/netserve"
	"pimail/internal/store"
)

// Role is what a server is for.
type Role int

const (
	MX         Role = iota // inbound mail from the internet (port 25)
	Submission             // mail from logged-in users (587, 465)
)

// Defaults for the zero values of Config. One source for both roles.
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
	// relay attempts, rejected messages, syntax errors) a session may
	// collect before it is closed with 421: a directory harvest or a
	// bounce flood ends early.
	DefaultMaxErrors = 20

	// DefaultMaxConnections bounds concurrent connections to the MX. A
	// session costs a goroutine and a few buffers, so the bound is about
	// overload and file descriptors: a flood gets 421 instead of a slower
	// server for everyone. Submission has its own, smaller default.
	DefaultMaxConnections           = 300
	DefaultSubmissionMaxConnections = 200
	// DefaultMaxConnectionsPerIP bounds concurrent connections from one
	// client (an IPv4 address or an IPv6 /64). Large senders open a few
	// parallel connections; a bot farm behind one address gets 421.
	DefaultMaxConnectionsPerIP = 10
	// DefaultConnectionRate is how many connections one client may open
	// per DefaultConnectionRateWindow.
	DefaultConnectionRate       = 60
	DefaultConnectionRateWindow = time.Minute
	// DefaultPregreetWait is how long the MX waits, after the first line
	// of its greeting, for a client to stay silent (see
	// Config.PregreetWait for the trade-off).
	DefaultPregreetWait = 300 * time.Millisecond
	// DefaultDNSBLThreshold is the blocklist score at which RCPT is refused.
	DefaultDNSBLThreshold = 1.0
	// DefaultSpoolThreshold is the largest message kept in memory while
	// it arrives; larger ones go to a file in SpoolDir. With the default
	// connection limit the MX holds at most 300 × 128 KiB in message
	// buffers, whatever the clients send.
	DefaultSpoolThreshold = 128 << 10
	// DefaultLargeDeliveries is how many spooled messages are delivered
	// (mapped into memory, parsed, scanned, stored) at once; more wait.
	// With 50 MiB messages that bounds their memory to about 100 MiB of
	// mapped file pages.
	DefaultLargeDeliveries = 2
)

// maxDNSBLWait is a last bound on the wait for a blocklist verdict at
// RCPT; the checker's own timeout normally ends it much sooner.
const maxDNSBLWait = 30 * time.Second

// shutdownGrace bounds how long Close waits for deliveries already handed
// to the store, so that a message whose commit is under way is not cut off.
const shutdownGrace = 10 * time.Second

// Config is an SMTP server's configuration. Every zero field means its
// documented default.
type Config struct {
	Role Role
	// Hostname is the server's name in the greeting, EHLO reply and
	// Received fields, and the right side of generated Message-IDs;
	// default os.Hostname().
	Hostname string
	// MaxMessageBytes is the largest message accepted (advertised as
	// SIZE, RFC 1870); larger ones get 552 5.3.4. Default 50 MiB.
	MaxMessageBytes int64
	// MaxRecipients per transaction; more get 452 4.5.3. Default 100.
	MaxRecipients int
	// MaxLineLength is the longest line accepted, command or message
	// text, in bytes with its CR LF; longer closes the connection with
	// 500. Default 64 KiB.
	MaxLineLength int
	// ReadTimeout is how long a whole command may take to arrive,
	// however it trickles in; default 5 minutes.
	ReadTimeout time.Duration
	// WriteTimeout is how long a reply may take to send; default 5 minutes.
	WriteTimeout time.Duration
	// DataTimeout is how long each 4 KiB of message data may take;
	// default 3 minutes. A client that trickles less is cut off.
	DataTimeout time.Duration
	// DeliverTimeout bounds storing a complete message; default 5 minutes.
	DeliverTimeout time.Duration
	// TLS enables STARTTLS (RFC 3207); required for submission, which
	// also serves implicit TLS with it (ServeTLS).
	TLS *tls.Config
	// MaxErrors is how many rejected commands a session may have before it
	// is closed with 421; default 20.
	MaxErrors int

	// MaxConnections bounds concurrent connections (default 300 for the
	// MX, 200 for submission), MaxConnectionsPerIP those from one client,
	// an IPv4 address or an IPv6 /64 (default 10). Over either, the
	// client gets "421 4.7.0" in place of the greeting. Negative: no limit.
	MaxConnections      int
	MaxConnectionsPerIP int
	// ConnectionRate is how many connections a client may open per
	// ConnectionRateWindow (defaults 60 per minute); more get 421 4.7.0.
	// Refused attempts count too. Negative: no limit.
	ConnectionRate       int
	ConnectionRateWindow time.Duration
	// ExemptNetworks skip the per-client limits, the rate limit and the
	// pregreet test (not the total limit, and not blocklist checks).
	// Loopback clients are exempt too unless LimitLoopback is set: local
	// tools and benchmarks connect from there.
	ExemptNetworks []netip.Prefix
	LimitLoopback  bool

	// SpoolDir holds messages larger than SpoolThreshold (default 128
	// KiB) while they arrive and are delivered; default os.TempDir().
	// A spooled message is never fsynced there: the store makes the
	// accepted copy durable.
	SpoolDir       string
	SpoolThreshold int
	// LargeDeliveries bounds the spooled messages delivered at once
	// (default 2).
	LargeDeliveries int

	// MX role only.
	//
	// PregreetWait is how long the server waits after the first line of a
	// multi-line greeting ("220-host ESMTP") before it sends the rest: a
	// client that sends anything in that time gets 554 5.7.1 and is
	// dropped (RFC 5321 §4.3.1: the client waits for the greeting).
	// Default 300 ms; negative disables the test.
	//
	// The trade-off: every client, legitimate or not, waits this long
	// for its greeting. Postfix's postscreen waits 6 s, which catches
	// more slow ratware; 300 ms catches the bots that do not wait at all
	// or read only the first greeting line, costs a conforming sender
	// nothing it would notice, and overlaps the blocklist lookup, which
	// starts at connect.
	PregreetWait time.Duration
	// DNSBLThreshold is the blocklist score (Deps.DNSBL) at which RCPT is
	// refused with 554 5.7.1; default 1.
	DNSBLThreshold float64

	// Submission role only.
	//
	// InsecureLoopbackAuth allows AUTH without TLS from 127.0.0.0/8 and
	// ::1 (development); never from other addresses.
	InsecureLoopbackAuth bool
	// NoSentCopy turns off the copy of submitted mail in the sender's
	// Sent mailbox (for clients that save their own by IMAP APPEND).
	NoSentCopy bool
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
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.ReadTimeout, DefaultReadTimeout}, {&c.WriteTimeout, DefaultWriteTimeout},
		{&c.DataTimeout, DefaultDataTimeout}, {&c.DeliverTimeout, DefaultDeliverTimeout},
		{&c.ConnectionRateWindow, DefaultConnectionRateWindow},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.MaxErrors <= 0 {
		c.MaxErrors = DefaultMaxErrors
	}
	total := DefaultMaxConnections
	if c.Role == Submission {
		total = DefaultSubmissionMaxConnections
	}
	defaultInt(&c.MaxConnections, total)
	defaultInt(&c.MaxConnectionsPerIP, DefaultMaxConnectionsPerIP)
	defaultInt(&c.ConnectionRate, DefaultConnectionRate)
	if c.PregreetWait == 0 {
		c.PregreetWait = DefaultPregreetWait
	}
	if c.DNSBLThreshold <= 0 {
		c.DNSBLThreshold = DefaultDNSBLThreshold
	}
	if c.SpoolDir == "" {
		c.SpoolDir = os.TempDir()
	}
	if c.SpoolThreshold <= 0 {
		c.SpoolThreshold = DefaultSpoolThreshold
	}
	if c.LargeDeliveries <= 0 {
		c.LargeDeliveries = DefaultLargeDeliveries
	}
}

// defaultInt sets a zero limit to its default; a negative one stays
// negative and means "no limit".
func defaultInt(v *int, def int) {
	if *v == 0 {
		*v = def
	}
}

// Pipeline is the delivery pipeline as the SMTP server uses it;
// *delivery.Pipeline is one.
type Pipeline interface {
	Resolve(address string) (directory.Resolution, error)
	Forwards() bool
	CheckQuota(ctx context.Context, address string, size int64) error
	DeliverMessage(ctx context.Context, env delivery.Envelope, m *delivery.Message) ([]store.Delivered, error)
}

// Queue takes submitted mail for remote recipients; *queue.Queue is one.
type Queue interface {
	Enqueue(ctx context.Context, accountID int64, from string, rcpts []string, raw []byte) (int64, error)
	// Bounce sends the sender a failure notice (DSN) for rcpts at once.
	Bounce(ctx context.Context, from string, rcpts []string, reason string, raw []byte)
}

// Mailboxes is what submission needs of the store: the aliases a user may
// send as, and the Sent mailbox.
type Mailboxes interface {
	Aliases(ctx context.Context) ([]store.Alias, error)
	Mailboxes(ctx context.Context, accountID int64) ([]store.Mailbox, error)
	Append(ctx context.Context, mailboxID int64, raw []byte, flags store.Flags, keywords []string, internalDate time.Time) (store.Delivered, error)
}

// Deps are a server's collaborators. Both roles need Pipeline (submission
// delivers its local recipients through it); the MX may have DNSBL and
// DeliveryLog; submission needs Dir, Mailboxes, Queue and Auth.
type Deps struct {
	Pipeline Pipeline
	// DNSBL checks every MX client's address when it connects; nil: no
	// blocklist checks. A lookup that does not answer within the
	// checker's timeout counts as "not listed".
	DNSBL *dnsbl.Checker
	// DeliveryLog records refused recipients and messages for the admin;
	// nil records nothing. Accepted mail is recorded by the pipeline.
	DeliveryLog *deliverylog.Logger

	Dir       *directory.View
	Mailboxes Mailboxes
	Queue     Queue
	Auth      *auth.Authenticator

	Logger *slog.Logger
}

// Server is an SMTP server in one role. It is safe for concurrent use;
// one Server may serve several listeners.
type Server struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	proto string // metrics label
	net   *netserve.Server
	role  role

	// ctx is the parent of every delivery; cancelled at the end of Close.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup // deliveries handed to the pipeline

	large chan struct{} // LargeDeliveries slots
	ehlo  [2][2][]byte  // EHLO's replies (ehloReplies)
	greet string        // the greeting line
}

// New returns a server; Serve (and ServeTLS) start it on listeners.
func New(cfg Config, d Deps) (*Server, error) {
	cfg.setDefaults()
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Pipeline == nil {
		return nil, errors.New("smtpserver: a Pipeline is required")
	}
	s := &Server{cfg: cfg, deps: d, large: make(chan struct{}, cfg.LargeDeliveries), ehlo: ehloReplies(&cfg)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	switch cfg.Role {
	case MX:
		s.proto, s.log, s.role = metrics.ProtoSMTP, d.Logger, mxRole{s}
	case Submission:
		if cfg.TLS == nil {
			return nil, errors.New("smtpserver: submission needs a TLS configuration")
		}
		if d.Dir == nil || d.Mailboxes == nil || d.Queue == nil || d.Auth == nil {
			return nil, errors.New("smtpserver: submission needs Dir, Mailboxes, Queue and Auth")
		}
		s.proto, s.log, s.role = metrics.ProtoSubmission, d.Logger.With("component", "submission"), submissionRole{s}
	default:
		return nil, fmt.Errorf("smtpserver: unknown role %d", cfg.Role)
	}
	greet := func(r *reply) string { return r.line(cfg.Hostname) }
	s.net = netserve.New(netserve.Config{
		Name:                s.proto,
		MaxConnections:      cfg.MaxConnections,
		MaxConnectionsPerIP: cfg.MaxConnectionsPerIP,
		ConnectionRate:      cfg.ConnectionRate,
		RateWindow:          cfg.ConnectionRateWindow,
		LimitLoopback:       cfg.LimitLoopback,
		ExemptNetworks:      cfg.ExemptNetworks,
		Refusal:             greet(replyTooManyConns),
		PerClientRefusal:    greet(replyTooManyConnsIP),
		RateRefusal:         greet(replyRateLimit),
		Logger:              s.log,
	}, s.serveConn)
	return s, nil
}

// Serve accepts connections on ln until Close; it returns nil after
// Close. A listener made by tls.NewListener serves implicit TLS.
func (s *Server) Serve(ln net.Listener) error {
	if s.isClosing() {
		ln.Close()
		return nil
	}
	if err := s.net.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%s: serve %s: %w", s.proto, ln.Addr(), err)
	}
	return nil
}

// ServeTLS accepts implicit-TLS connections (465, RFC 8314 §3.3).
func (s *Server) ServeTLS(ln net.Listener) error {
	return s.Serve(tls.NewListener(ln, s.cfg.TLS))
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
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
	err := s.net.Close()
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		s.log.Warn("deliveries still running at shutdown; cancelling them")
	}
	s.cancel()
	if err != nil {
		return fmt.Errorf("%s: close: %w", s.proto, err)
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
