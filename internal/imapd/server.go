// Package imapd is pimail's IMAP server: IMAP4rev2 (RFC 9051) with
// IMAP4rev1 (RFC 3501) behaviour for clients that do not ENABLE IMAP4rev2.
// The wire grammar lives in internal/imapwire; this package holds the
// sessions: authentication, the per-session view of the selected mailbox
// (sequence numbers, \Recent, pending expunges) and the commands, which
// are answered from the store's index and blobs.
//
// Extensions: LITERAL+ (RFC 7888), MULTIAPPEND (RFC 3502), CATENATE (RFC
// 4469), ID (RFC 2971), ENABLE (RFC 5161), IDLE (RFC 2177), NOTIFY (RFC
// 5465), NAMESPACE (RFC 2342), UNSELECT (RFC 3691), UIDPLUS (RFC 4315),
// MOVE (RFC 6851), CHILDREN (RFC 3348), SPECIAL-USE and CREATE-SPECIAL-USE
// (RFC 6154), LIST-EXTENDED (RFC 5258), LIST-STATUS (RFC 5819), ESEARCH
// (RFC 4731), SEARCHRES (RFC 5182), STATUS=SIZE (RFC 8438), BINARY (RFC
// 3516), UTF8=ACCEPT (RFC 6855), APPENDLIMIT (RFC 7889), CONDSTORE and
// QRESYNC (RFC 7162), SORT and THREAD=ORDEREDSUBJECT, THREAD=REFERENCES
// (RFC 5256), SORT=DISPLAY (RFC 5957), ESORT, CONTEXT=SEARCH and
// CONTEXT=SORT (RFC 5267), COMPRESS=DEFLATE (RFC 4978), OBJECTID (RFC
// 8474, objectid.go) and QUOTA (RFC 9208, without resource limits for
// now). docs/conformance.md has what Dovecot's imaptest says of them.
package imapd

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"pimail/internal/netserve"
	"pimail/internal/store"
)

// Authenticator checks a user's password (internal/auth implements it).
type Authenticator interface {
	Authenticate(ctx context.Context, username, password, remoteIP string) (store.Account, error)
}

// Defaults for zero Config fields.
const (
	DefaultMaxLineLength  = 64 * 1024
	DefaultMaxLiteralSize = 50 * 1024 * 1024
	// DefaultIdleTimeout is the autologout timer for authenticated sessions;
	// RFC 9051 §5.4 asks for at least 30 minutes.
	DefaultIdleTimeout = 30 * time.Minute
	// preAuthTimeout bounds a session that has not logged in yet.
	preAuthTimeout = 2 * time.Minute
	// preAuthLiteral bounds literals before authentication (LOGIN arguments).
	preAuthLiteral = 8 * 1024
	// maxPreAuthCommands and maxBadCommands end abusive sessions.
	maxPreAuthCommands = 30
	maxBadCommands     = 10
	maxAuthFailures    = 3
	writeTimeout       = 5 * time.Minute
	// DefaultMaxConnections and DefaultMaxConnectionsPerIP bound the open
	// connections in total and per client address (an IPv4 address or an
	// IPv6 /64). Mail clients open several connections each (one per
	// watched mailbox), hence the generous per-address default.
	DefaultMaxConnections      = 1000
	DefaultMaxConnectionsPerIP = 20
	// DefaultConnectionRate bounds the new connections of one client
	// address per minute (a mail client opens a few connections at start and then keeps them).
	DefaultConnectionRate = 60
)

// Config configures the IMAP server; the zero value is usable.
type Config struct {
	Hostname string
	// TLS enables STARTTLS when non-nil. Implicit TLS (port 993) is done
	// by the caller wrapping the listener with tls.NewListener.
	TLS *tls.Config
	// AllowInsecureAuth allows LOGIN and AUTHENTICATE without TLS;
	// otherwise LOGINDISABLED is announced until TLS (RFC 9051 §6.2.3).
	AllowInsecureAuth bool
	// AllowLoopbackAuth allows LOGIN and AUTHENTICATE without TLS from
	// loopback addresses (127.0.0.0/8, ::1).
	AllowLoopbackAuth bool
	MaxLineLength     int   // bytes per command line; default 64 KiB
	MaxLiteralSize    int64 // APPENDLIMIT (RFC 7889); default 50 MiB
	// IdleTimeout ends an authenticated session that sends nothing for
	// this long (also during IDLE); sessions before authentication get
	// the smaller of this and two minutes.
	IdleTimeout time.Duration
	// MaxConnections bounds the open connections over all listeners;
	// 0 means DefaultMaxConnections, a negative value no limit.
	MaxConnections int
	// MaxConnectionsPerIP bounds the open connections of one client
	// address (IPv4 address or IPv6 /64); loopback clients are held only
	// to MaxConnections. 0 means DefaultMaxConnectionsPerIP, a negative
	// value no limit.
	MaxConnectionsPerIP int
	// ConnectionRate bounds the new connections of one client address per
	// minute (a burst of that many, then one every minute/rate; attempts
	// over the limit count too); loopback clients are exempt unless
	// LimitLoopback is set. 0 means DefaultConnectionRate, a negative
	// value no limit.
	ConnectionRate int
	// LimitLoopback holds loopback clients to the per-address limits.
	LimitLoopback bool
	// Junk, when non-nil, learns the junk decisions that COPY, MOVE and
	// STORE express (junktrain.go).
	Junk JunkTrainer
}

func (c Config) withDefaults() Config {
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.MaxLineLength <= 0 {
		c.MaxLineLength = DefaultMaxLineLength
	}
	if c.MaxLiteralSize <= 0 {
		c.MaxLiteralSize = DefaultMaxLiteralSize
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if c.ConnectionRate == 0 {
		c.ConnectionRate = DefaultConnectionRate
	}
	return c
}

// Store is what the IMAP server needs of the store.
type Store interface {
	store.MailboxReader
	store.MailboxWriter
	store.MessageReader
	store.HeaderReader
	store.BlobReader
	store.ChangeFeed
	store.Mutator
	store.Appender
	store.Searcher
	store.Quotas
	store.Recent
}

// Server serves IMAP on any number of listeners.
type Server struct {
	cfg    Config
	st     Store
	authn  Authenticator
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	net *netserve.Server // accept loop, connection limits, Close
}

// New returns a server; call Serve for each listener.
func New(cfg Config, st Store, authn Authenticator, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, st: st, authn: authn, log: logger, ctx: ctx, cancel: cancel}
	s.net = netserve.New(netserve.Config{
		Name: "imap", MaxConnections: cfg.MaxConnections, MaxConnectionsPerIP: cfg.MaxConnectionsPerIP,
		ConnectionRate: cfg.ConnectionRate, LimitLoopback: cfg.LimitLoopback,
		Refusal: tooManyConns, RateRefusal: tooManyConnsRate, Logger: logger,
	}, func(c net.Conn) { newSession(s, c).run() })
	return s
}

// Serve accepts connections on ln until Close, one goroutine per
// connection. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error { return s.net.Serve(ln) }

// Close stops all listeners and ends all sessions, then waits (bounded)
// for the session goroutines.
func (s *Server) Close() error {
	s.cancel()
	return s.net.Close()
}

// tooManyConns is the answer, in place of the greeting, to a connection
// over a limit.
const tooManyConns = "* BYE [UNAVAILABLE] too many connections\r\n"

// tooManyConnsRate is the answer to a connection over the rate limit.
const tooManyConnsRate = "* BYE [UNAVAILABLE] too many connections from your address, try again later\r\n"
