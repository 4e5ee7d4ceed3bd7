// Package pop3d is pimail's POP3 server (RFC 1939) with the extension
// mechanism of RFC 2449 (CAPA, response codes, PIPELINING, TOP, UIDL),
// STLS (RFC 2595), SASL PLAIN (RFC 5034, RFC 4616) and the [AUTH] and
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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

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
	// rejectTimeout bounds writing the refusal to a connection over a
	// limit (and the TLS handshake before it on an implicit-TLS port).
	rejectTimeout = 5 * time.Second
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
	return c
}

// Server serves POP3 on any number of listeners.
type Server struct {
	cfg    Config
	st     store.Store
	authn  Authenticator
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	locks  *lockTable

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
	limits    *connLimiter
}

// New returns a server; call Serve for each listener.
func New(cfg Config, st store.Store, authn Authenticator, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg = cfg.withDefaults()
	return &Server{
		cfg:       cfg,
		limits:    newConnLimiter(cfg.MaxConnections, cfg.MaxConnectionsPerIP),
		st:        st,
		authn:     authn,
		log:       logger,
		ctx:       ctx,
		cancel:    cancel,
		locks:     newLockTable(),
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
	}
}

// Serve accepts connections on ln until Close, one goroutine per
// connection. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("pop3 accept: %w", err)
		}
		delay = 0
		key, exempt := clientKeyOf(c.RemoteAddr())
		if over := s.limits.acquire(key, exempt); over != "" {
			s.refuse(c, key, over)
			continue
		}
		if !s.track(c) {
			s.limits.release(key)
			c.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.limits.release(key)
			defer s.untrack(c)
			newSession(s, c).run()
		}()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// Close stops all listeners and ends all sessions (without applying their
// deletions: only QUIT does), then waits, bounded, for the session
// goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.log.Warn("pop3 sessions still running after close")
	}
	return nil
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

// refuse answers a connection over a limit and closes it, in its own
// goroutine (on an implicit-TLS port the write runs the handshake) within
// rejectTimeout.
func (s *Server) refuse(c net.Conn, key netip.Prefix, over string) {
	if over == overTotalLimit {
		s.log.Warn("connection refused: server connection limit", "remote", c.RemoteAddr().String(), "limit", s.cfg.MaxConnections)
	} else {
		s.log.Info("connection refused: per-address connection limit", "remote", c.RemoteAddr().String(), "client", key.String(), "limit", s.cfg.MaxConnectionsPerIP)
	}
	go func() {
		_ = c.SetDeadline(time.Now().Add(rejectTimeout))
		_, _ = io.WriteString(c, tooManyConns)
		c.Close()
	}()
}

// Reasons connLimiter.acquire gives for a refusal.
const (
	overTotalLimit  = "total"
	overClientLimit = "per-address"
)

// connLimiter counts open connections in total and per client key.
type connLimiter struct {
	maxTotal, maxPerClient int // <= 0: no limit
	mu                     sync.Mutex
	total                  int
	open                   map[netip.Prefix]int
}

func newConnLimiter(maxTotal, maxPerClient int) *connLimiter {
	return &connLimiter{maxTotal: maxTotal, maxPerClient: maxPerClient, open: map[netip.Prefix]int{}}
}

// acquire counts a new connection from key open, or returns which limit
// refuses it. An exempt (loopback) client is held only to the total.
func (l *connLimiter) acquire(key netip.Prefix, exempt bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxTotal > 0 && l.total >= l.maxTotal {
		return overTotalLimit
	}
	if !exempt && l.maxPerClient > 0 && l.open[key] >= l.maxPerClient {
		return overClientLimit
	}
	l.total++
	l.open[key]++
	return ""
}

// release gives back a connection acquire counted.
func (l *connLimiter) release(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if n := l.open[key] - 1; n > 0 {
		l.open[key] = n
	} else {
		delete(l.open, key)
	}
}

// clientKeyOf returns the unit the per-address limit counts, an IPv4
// address or the /64 of an IPv6 address (one subscriber holds a whole
// /64), and whether the client is exempt from that limit (loopback).
// Addresses that are not IP (tests with pipes) share one zero key.
func clientKeyOf(a net.Addr) (netip.Prefix, bool) {
	var ip netip.Addr
	if tcp, ok := a.(*net.TCPAddr); ok {
		ip, _ = netip.AddrFromSlice(tcp.IP)
	} else if a != nil {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	ip = ip.Unmap()
	if !ip.IsValid() {
		return netip.Prefix{}, false
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p, ip.IsLoopback()
	}
	return netip.PrefixFrom(ip, ip.BitLen()), ip.IsLoopback()
}
