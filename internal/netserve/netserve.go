// Package netserve is the accept loop and the connection limits of every
// listener (IMAP, POP3, ManageSieve, both SMTP roles; HTTP through
// Listener): a goroutine per connection, limits on open
// connections in total and per client address and on new connections per
// client address and minute, tracking of listeners and connections so that
// Close ends them all, and a bounded wait for the sessions to finish.
//
// It counts connections in the metrics package (pimail_connections_total,
// pimail_connections_active, pimail_connections_refused_total), labelled
// with Config.Name as the protocol.
//
// A refused connection is logged with the client's bare address in
// "remote", one line per refusal, at WARN for the per-client limits, so
// that fail2ban can ban a client that keeps hammering the port
// (SECURITY.md):
//
//	level=WARN msg="connection refused: rate limit" proto=imap remote=192.0.2.7 client=192.0.2.7/32 limit=60 window=1m0s
package netserve

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"pimail/internal/metrics"
)

// rejectTimeout bounds writing the refusal to a connection over a limit
// (and the TLS handshake before it on an implicit-TLS port).
const rejectTimeout = 5 * time.Second

// Config configures a Server.
type Config struct {
	// Name is the protocol, for errors and logs ("imap").
	Name string
	// MaxConnections bounds the open connections in total,
	// MaxConnectionsPerIP those from one client (an IPv4 address or an
	// IPv6 /64; loopback counts only against the total). <= 0: no limit.
	MaxConnections, MaxConnectionsPerIP int
	// ConnectionRate bounds the new connections of one client per
	// RateWindow (default a minute): a token bucket that allows a burst
	// of ConnectionRate and then one every RateWindow/ConnectionRate.
	// Refused attempts spend tokens too. <= 0: no limit. Loopback
	// clients are exempt.
	ConnectionRate int
	RateWindow     time.Duration
	// LimitLoopback holds loopback clients to the per-client limits too
	// (tests, and a host whose clients all come through a local proxy
	// should not set it).
	LimitLoopback bool
	// ExemptNetworks are held only to the total, like loopback.
	ExemptNetworks []netip.Prefix
	// Refusal is written, in place of the greeting, to a connection over
	// the total limit, which is then closed; PerClientRefusal to one over
	// the per-client limit and RateRefusal to one over the rate limit
	// (both default Refusal).
	Refusal, PerClientRefusal, RateRefusal string
	Logger                                 *slog.Logger
}

// Server accepts connections and runs handle for each.
type Server struct {
	cfg    Config
	handle func(net.Conn)
	limits *Limiter

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// New returns a server that runs handle, in its own goroutine, for every
// accepted connection within the limits.
func New(cfg Config, handle func(net.Conn)) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = time.Minute
	}
	if cfg.RateRefusal == "" {
		cfg.RateRefusal = cfg.Refusal
	}
	if cfg.PerClientRefusal == "" {
		cfg.PerClientRefusal = cfg.Refusal
	}
	return &Server{
		cfg:       cfg,
		handle:    handle,
		limits:    NewLimiter(cfg.MaxConnections, cfg.MaxConnectionsPerIP, cfg.ConnectionRate, cfg.RateWindow),
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
	}
}

// Serve accepts connections on ln until Close. It returns nil after Close.
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
			if !Retryable(err) {
				return fmt.Errorf("%s accept: %w", s.cfg.Name, err)
			}
			delay = backoff(delay)
			s.cfg.Logger.Warn("accept failed; retrying", "proto", s.cfg.Name, "err", err, "delay", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		release, ok := s.admit(c)
		if !ok {
			continue
		}
		if !s.track(c) {
			release()
			c.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer release()
			defer s.untrack(c)
			s.handle(c)
		}()
	}
}

// clientKey is the key a connection's limits count under, and whether the
// client is exempt from the per-client limits.
func (s *Server) clientKey(a net.Addr) (netip.Prefix, bool) {
	key, ip := clientKeyOf(a)
	return key, s.Exempt(ip)
}

// Exempt reports whether a client skips the per-client limits (and, in
// the SMTP server, the pregreet test): loopback unless LimitLoopback, and
// ExemptNetworks.
func (s *Server) Exempt(ip netip.Addr) bool {
	if ip.IsLoopback() && !s.cfg.LimitLoopback {
		return true
	}
	for _, p := range s.cfg.ExemptNetworks {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// admit takes a place for c within the limits, or refuses and closes it.
// The connection is counted in the metrics; release gives the place back.
func (s *Server) admit(c net.Conn) (release func(), ok bool) {
	key, exempt := s.clientKey(c.RemoteAddr())
	if over := s.limits.Acquire(key, exempt); over != "" {
		s.refuse(c, key, over)
		return nil, false
	}
	metrics.Connections.With(s.cfg.Name).Inc()
	active := metrics.ConnectionsActive.With(s.cfg.Name)
	active.Inc()
	return func() {
		active.Dec()
		s.limits.Release(key)
	}, true
}

// Retryable reports whether an Accept error is worth retrying: a timeout,
// or a temporary condition such as running out of file descriptors
// (EMFILE, ENFILE) or a connection aborted before it was accepted. Out of
// descriptors, the accept loop waits and tries again instead of giving
// up, so that one flooded listener never stops the others, or the
// process.
func Retryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// backoff doubles an accept retry delay, from 5 ms up to a second, as
// net/http does.
func backoff(d time.Duration) time.Duration {
	return min(max(2*d, 5*time.Millisecond), time.Second)
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

// Close stops all listeners and closes all connections, then waits
// (bounded) for the handlers to return.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
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
		s.cfg.Logger.Warn(s.cfg.Name + " sessions still running after close")
	}
	return nil
}

// refuse answers a connection over a limit and closes it, in its own
// goroutine (on an implicit-TLS port the write runs the handshake) within
// rejectTimeout.
func (s *Server) refuse(c net.Conn, key netip.Prefix, over string) {
	remote := remoteIP(c.RemoteAddr())
	refusal := s.cfg.Refusal
	switch over {
	case OverTotal:
		metrics.ConnectionsRefused.With(s.cfg.Name, metrics.RefuseTotal).Inc()
		s.cfg.Logger.Warn("connection refused: server connection limit", "remote", remote, "limit", s.cfg.MaxConnections)
	case OverRate:
		metrics.ConnectionsRefused.With(s.cfg.Name, metrics.RefuseRate).Inc()
		s.cfg.Logger.Warn("connection refused: rate limit", "remote", remote, "client", key.String(),
			"limit", s.cfg.ConnectionRate, "window", s.cfg.RateWindow)
		refusal = s.cfg.RateRefusal
	default:
		metrics.ConnectionsRefused.With(s.cfg.Name, metrics.RefusePerAddress).Inc()
		s.cfg.Logger.Warn("connection refused: per-address connection limit", "remote", remote, "client", key.String(),
			"limit", s.cfg.MaxConnectionsPerIP)
		refusal = s.cfg.PerClientRefusal
	}
	go func() {
		_ = c.SetDeadline(time.Now().Add(rejectTimeout))
		_, _ = io.WriteString(c, refusal)
		c.Close()
	}()
}

// Active returns the number of open connections.
func (s *Server) Active() int { return s.limits.Active() }

// remoteIP is the address of a client without the port, as fail2ban's
// <HOST> matches it.
func remoteIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}
