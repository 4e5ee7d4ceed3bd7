// Package imapd is pimail's IMAP server: IMAP4rev2 (RFC 9051) with
// IMAP4rev1 (RFC 3501) behaviour for clients that do not ENABLE IMAP4rev2.
// The wire grammar lives in internal/imapwire; this package holds the
// sessions: authentication, the per-session view of the selected mailbox
// (sequence numbers, \Recent, pending expunges) and the commands, which
// are answered from the store's index and blobs.
//
// Extensions: LITERAL+ (RFC 7888), ID (RFC 2971), ENABLE (RFC 5161), IDLE
// (RFC 2177), NAMESPACE (RFC 2342), UNSELECT (RFC 3691), UIDPLUS (RFC
// 4315), MOVE (RFC 6851), CHILDREN (RFC 3348), SPECIAL-USE and
// CREATE-SPECIAL-USE (RFC 6154), LIST-EXTENDED (RFC 5258), LIST-STATUS
// (RFC 5819), ESEARCH (RFC 4731), SEARCHRES (RFC 5182), STATUS=SIZE (RFC
// 8438), BINARY (RFC 3516), UTF8=ACCEPT (RFC 6855), APPENDLIMIT (RFC
// 7889), CONDSTORE and QRESYNC (RFC 7162), SORT and THREAD=ORDEREDSUBJECT,
// THREAD=REFERENCES (RFC 5256), SORT=DISPLAY (RFC 5957), COMPRESS=DEFLATE
// (RFC 4978) and QUOTA (RFC 9208, without resource limits for now).
package imapd

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
	// rejectTimeout bounds writing the refusal to a connection over a
	// limit (and the TLS handshake before it on an implicit-TLS port).
	rejectTimeout = 5 * time.Second
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
	return c
}

// Server serves IMAP on any number of listeners.
type Server struct {
	cfg    Config
	st     store.Store
	authn  Authenticator
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

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
			return fmt.Errorf("imap accept: %w", err)
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

// Close stops all listeners and ends all sessions, then waits (bounded)
// for the session goroutines.
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
		s.log.Warn("imap sessions still running after close")
	}
	return nil
}

// tooManyConns is the answer, in place of the greeting, to a connection
// over a limit.
const tooManyConns = "* BYE [UNAVAILABLE] too many connections\r\n"

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
