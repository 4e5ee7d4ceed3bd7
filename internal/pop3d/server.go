// Package pop3d is pimail's POP3 server (RFC 1939) with the extension
// mechanism of RFC 2449 (CAPA, response codes, PIPELINING, TOP, UIDL),
// STLS (RFC 2595), SASL PLAIN and SCRAM-SHA-256 (RFC 5034, RFC 4616, RFC 7677) and the [AUTH] and
// [SYS/TEMP] response codes (RFC 3206).
//
// POP3 serves the INBOX of an account only. At login the session takes an
// in-process lock on the account's maildrop (a second session gets
// "-ERR [IN-USE]") and a snapshot of the INBOX: messages that arrive later
// are shown in the next session. DELE only marks; the deletions are
// applied (flag \Deleted, then expunge of exactly those UIDs) when the
// client sends QUIT, in the UPDATE state of RFC 1939 §6.
package pop3d

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
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
	// DefaultMaxLineLength bounds a command line. RFC 2449 §4 limits
	// commands to 255 octets, but SASL responses (RFC 5034 §4) can be
	// longer, so the default leaves room for long credentials.
	DefaultMaxLineLength = 4096
	// DefaultIdleTimeout is the autologout timer; RFC 1939 §3 requires at
	// least 10 minutes.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultWriteTimeout bounds one write to a client (a slow reader of
	// RETR holds the maildrop lock no longer than this per buffer).
	DefaultWriteTimeout = 5 * time.Minute
	// DefaultMaxErrors is how many invalid commands a session may send
	// before it is closed.
	DefaultMaxErrors = 10
	// maxAuthFailures ends a session after that many failed logins.
	maxAuthFailures = 3
	// maxPreAuthCommands ends a session that sends that many commands
	// without logging in (DESIGN: nothing expensive before trust).
	maxPreAuthCommands = 30
	// storeTimeout bounds the store calls of one command.
	storeTimeout = time.Minute
	// handshakeTimeout bounds the STLS handshake.
	handshakeTimeout = time.Minute
	// DefaultMaxConnections and DefaultMaxConnectionsPerIP bound the open
	// connections in total and per client address (an IPv4 address or an
	// IPv6 /64). A POP3 client holds one connection at a time (the
	// maildrop lock refuses a second session anyway).
	DefaultMaxConnections      = 200
	DefaultMaxConnectionsPerIP = 10
	// DefaultConnectionRate bounds the new connections of one client
	// address per minute (a POP3 client checking every minute opens one connection a minute).
	DefaultConnectionRate = 30
)

// Config configures the POP3 server; the zero value is usable.
type Config struct {
	// Hostname appears in the greeting; default "localhost".
	Hostname string
	// TLS enables STLS (RFC 2595 §4) when non-nil. Implicit TLS (port
	// 995) is done by the caller wrapping the listener with
	// tls.NewListener; such sessions count as secure.
	TLS *tls.Config
	// AllowInsecureAuth allows USER/PASS and AUTH without TLS from any
	// address. Without it they are allowed without TLS only from loopback
	// addresses (127.0.0.0/8, ::1).
	AllowInsecureAuth bool
	// MaxLineLength bounds one command line in bytes; longer lines are
	// discarded without being buffered and answered with -ERR.
	MaxLineLength int
	// IdleTimeout closes a session that sends nothing for this long,
	// without entering the UPDATE state (RFC 1939 §3). RFC 1939 requires
	// at least 10 minutes; smaller values are honoured (for tests) but
	// should not be configured.
	IdleTimeout time.Duration
	// WriteTimeout bounds each write to the client.
	WriteTimeout time.Duration
	// MaxErrors is the number of invalid commands (unknown, malformed,
	// wrong state, too long) after which a session is closed.
	MaxErrors int
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
}

func (c Config) withDefaults() Config {
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.MaxLineLength <= 0 {
		c.MaxLineLength = DefaultMaxLineLength
	}
	// A line must at least hold the longest RFC 2449 command.
	c.MaxLineLength = max(c.MaxLineLength, 255)
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.MaxErrors <= 0 {
		c.MaxErrors = DefaultMaxErrors
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

// Store is what POP3 needs of the store: the INBOX, its messages, and
// the flags and expunge of the UPDATE state.
type Store interface {
	store.MailboxReader
	store.MessageReader
	store.BlobReader
	store.Mutator
}

// Server serves POP3 on any number of listeners.
type Server struct {
	cfg    Config
	st     Store
	authn  Authenticator
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	locks  *lockTable

	net *netserve.Server // accept loop, connection limits, Close
}

// New returns a server; call Serve for each listener.
func New(cfg Config, st Store, authn Authenticator, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, st: st, authn: authn, log: logger, ctx: ctx, cancel: cancel, locks: newLockTable()}
	s.net = netserve.New(netserve.Config{
		Name: "pop3", MaxConnections: cfg.MaxConnections, MaxConnectionsPerIP: cfg.MaxConnectionsPerIP,
		ConnectionRate: cfg.ConnectionRate, LimitLoopback: cfg.LimitLoopback,
		Refusal: tooManyConns, RateRefusal: tooManyConnsRate, Logger: logger,
	}, func(c net.Conn) { newSession(s, c).run() })
	return s
}

// Serve accepts connections on ln until Close, one goroutine per
// connection. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error { return s.net.Serve(ln) }

// Close stops all listeners and ends all sessions (without applying their
// deletions: only QUIT does), then waits, bounded, for the session
// goroutines.
func (s *Server) Close() error {
	s.cancel()
	return s.net.Close()
}

// lockTable holds the maildrop locks of the sessions in this process
// (RFC 1939 §4: the server acquires an exclusive-access lock on the
// maildrop when it enters the TRANSACTION state).
type lockTable struct {
	mu   sync.Mutex
	held map[int64]struct{}
}

func newLockTable() *lockTable { return &lockTable{held: map[int64]struct{}{}} }

// acquire takes the lock of an account's maildrop; false when held.
func (t *lockTable) acquire(accountID int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.held[accountID]; ok {
		return false
	}
	t.held[accountID] = struct{}{}
	return true
}

func (t *lockTable) release(accountID int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, accountID)
}

// tooManyConns is the answer, in place of the greeting, to a connection
// over a limit.
const tooManyConns = "-ERR [SYS/TEMP] too many connections\r\n"

// tooManyConnsRate is the answer to a connection over the rate limit.
const tooManyConnsRate = "-ERR [SYS/TEMP] too many connections from your address, try again later\r\n"
