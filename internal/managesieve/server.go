// Package managesieve is pimail's ManageSieve server (RFC 5804): mail
// clients (Thunderbird's Sieve add-on, Roundcube's managesieve plugin,
// sieve-connect) list, upload, check, activate, rename and delete the
// Sieve scripts of the logged-in account, which delivery then runs
// (internal/delivery, internal/sieve).
//
// Port 4190, STARTTLS (RFC 5804 §2.2). Logins go through internal/auth
// like every other protocol's, with SASL PLAIN (RFC 4616) and
// SCRAM-SHA-256 (RFC 7677) offered only over TLS or from loopback. Every
// script is parsed before it is stored, so a script with an error is
// refused with its line and column and never reaches delivery. The limits
// are named settings: the size of a script, the number of scripts per
// account, the line length, the idle time and the connection limits.
package managesieve

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"pimail/internal/auth"
	"pimail/internal/netserve"
	"pimail/internal/store"
)

// Authenticator checks logins (internal/auth's Authenticator).
type Authenticator interface {
	Authenticate(ctx context.Context, username, password, remoteIP string) (store.Account, error)
	NewSCRAM(remoteIP string) (*auth.SCRAM, error)
}

// Defaults for zero Config fields.
const (
	DefaultMaxScriptSize = 64 << 10
	DefaultMaxScripts    = 20
	DefaultMaxLineLength = 8 << 10
	// DefaultIdleTimeout closes a silent session (RFC 5804 does not
	// fix one; clients keep sessions only while editing).
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultMaxErrors ends a session after that many bad commands.
	DefaultMaxErrors = 10
	// DefaultMaxConnections, DefaultMaxConnectionsPerIP and
	// DefaultConnectionRate bound the connections: a client opens one
	// while the user edits filters.
	DefaultMaxConnections      = 100
	DefaultMaxConnectionsPerIP = 5
	DefaultConnectionRate      = 20
	// maxAuthFailures ends a session after that many failed logins;
	// maxPreAuthCommands one that does not log in.
	maxAuthFailures    = 3
	maxPreAuthCommands = 30
	storeTimeout       = time.Minute
	handshakeTimeout   = time.Minute
)

// Config configures the server; the zero value is usable.
type Config struct {
	// Hostname appears in the greeting; default "localhost".
	Hostname string
	// TLS enables STARTTLS when not nil.
	TLS *tls.Config
	// AllowInsecureAuth allows logins without TLS from any address;
	// without it only loopback clients may log in without TLS.
	AllowInsecureAuth bool
	// MaxScriptSize bounds one script in bytes; MaxScripts the scripts
	// of one account.
	MaxScriptSize int64
	MaxScripts    int
	// MaxRedirects is announced as MAXREDIRECTS (RFC 5804 §1.7): the
	// redirects delivery allows per message.
	MaxRedirects int
	// MaxLineLength bounds a command line (literals apart).
	MaxLineLength int
	IdleTimeout   time.Duration
	MaxErrors     int
	// Connection limits, as for IMAP and POP3 (netserve): open in total,
	// per client (IPv4 address or IPv6 /64), new per client and minute;
	// negative turns a limit off. LimitLoopback holds loopback clients
	// to the per-client limits.
	MaxConnections, MaxConnectionsPerIP, ConnectionRate int
	LimitLoopback                                       bool
}

func (c Config) withDefaults() Config {
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.MaxScriptSize <= 0 {
		c.MaxScriptSize = DefaultMaxScriptSize
	}
	if c.MaxScripts <= 0 {
		c.MaxScripts = DefaultMaxScripts
	}
	if c.MaxLineLength <= 0 {
		c.MaxLineLength = DefaultMaxLineLength
	}
	c.MaxLineLength = max(c.MaxLineLength, 1024)
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
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

// Store is what the server needs of the store: the account's scripts.
type Store interface {
	store.Sieve
}

// Server serves ManageSieve on any number of listeners.
type Server struct {
	cfg    Config
	st     Store
	authn  Authenticator
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	net    *netserve.Server
}

// New returns a server; call Serve for each listener.
func New(cfg Config, st Store, authn Authenticator, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, st: st, authn: authn, log: logger, ctx: ctx, cancel: cancel}
	s.net = netserve.New(netserve.Config{
		Name: "managesieve", MaxConnections: cfg.MaxConnections, MaxConnectionsPerIP: cfg.MaxConnectionsPerIP,
		ConnectionRate: cfg.ConnectionRate, LimitLoopback: cfg.LimitLoopback,
		Refusal: `BYE (TRYLATER) "Too many connections, try again later"` + "\r\n", Logger: logger,
	}, func(c net.Conn) { newSession(s, c).run() })
	return s
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error { return s.net.Serve(ln) }

// Close stops the listeners and ends the sessions.
func (s *Server) Close() error {
	s.cancel()
	return s.net.Close()
}
