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
	"log/slog"
	"net"
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
}

// New returns a server; call Serve for each listener.
func New(cfg Config, st store.Store, authn Authenticator, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:       cfg.withDefaults(),
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
		if !s.track(c) {
			c.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
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
