package smtpd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"pimail/internal/dnsbl"
	"pimail/internal/netserve"
)

// rejectWriteTimeout bounds writing the one-line refusal to a connection
// the gate turns away.
const rejectWriteTimeout = 5 * time.Second

// gateListener stands between the network and go-smtp. Its own accept
// loop takes each connection and, in the connection's goroutine, applies
// the cheap checks before go-smtp sees it (DESIGN principle 1): the
// connection limits, the blocklist lookup's start, and the pregreet test.
// Admitted connections come out of Accept.
type gateListener struct {
	net.Listener
	srv   *Server
	conns chan net.Conn
	done  chan struct{}

	closeOnce sync.Once
	mu        sync.Mutex
	err       error                 // why the accept loop stopped
	waiting   map[net.Conn]struct{} // connections in the pregreet wait
}

func newGateListener(s *Server, ln net.Listener) *gateListener {
	l := &gateListener{
		Listener: ln, srv: s,
		conns:   make(chan net.Conn),
		done:    make(chan struct{}),
		waiting: map[net.Conn]struct{}{},
	}
	go l.acceptLoop()
	return l
}

// Accept returns the next admitted connection.
func (l *gateListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		return nil, l.err
	}
}

// Close stops accepting and drops the connections still in the gate.
func (l *gateListener) Close() error {
	err := l.Listener.Close()
	l.stop(net.ErrClosed)
	l.mu.Lock()
	for c := range l.waiting {
		c.Close()
	}
	l.mu.Unlock()
	return err
}

func (l *gateListener) stop(err error) {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	})
}

// acceptLoop accepts until the listener fails or is closed. Temporary
// errors (out of file descriptors) back off up to a second, as net/http
// does.
func (l *gateListener) acceptLoop() {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.srv.logger.Warn("accept failed; retrying", "err", err, "delay", delay)
				select {
				case <-time.After(delay):
					continue
				case <-l.done:
					return
				}
			}
			l.stop(fmt.Errorf("accept: %w", err))
			return
		}
		delay = 0
		go l.admit(c)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// admit runs the gate's checks on one new connection.
func (l *gateListener) admit(c net.Conn) {
	s := l.srv
	ip := addrOf(c.RemoteAddr())
	key := netserve.ClientKey(ip)
	exempt := s.exempt(ip)
	switch s.limits.Acquire(key, exempt) {
	case netserve.OverRate:
		s.stats.rejectedRate.Add(1)
		s.logger.Info("connection refused: rate limit", "ip", ip)
		rejectConn(c, s.cfg.Hostname, replyRateLimit)
		return
	case netserve.OverTotal:
		s.stats.rejectedTotal.Add(1)
		s.logger.Warn("connection refused: server connection limit", "ip", ip, "limit", s.cfg.MaxConnections)
		rejectConn(c, s.cfg.Hostname, replyTooManyConns)
		return
	case netserve.OverPerClient:
		s.stats.rejectedPerIP.Add(1)
		s.logger.Info("connection refused: per-client connection limit", "ip", ip)
		rejectConn(c, s.cfg.Hostname, replyTooManyConnsIP)
		return
	}
	if _, isTLS := c.(*tls.Conn); isTLS {
		// go-smtp must see the *tls.Conn itself to run the handshake, so
		// an implicit-TLS connection cannot be wrapped: it passes without
		// a limiter slot or pregreet test, and its session starts the
		// blocklist lookup itself.
		s.limits.Release(key)
		l.handOver(c)
		return
	}
	gc := &gatedConn{Conn: c, release: func() { s.limits.Release(key) }}
	if s.cfg.DNSBL != nil {
		// Started now, answered by the time the client reaches RCPT.
		gc.reputation = s.cfg.DNSBL.Start(ip)
	}
	if s.cfg.PregreetWait > 0 && !exempt && !l.pregreet(gc, ip) {
		return
	}
	l.handOver(gc)
}

// handOver passes an admitted connection to go-smtp.
func (l *gateListener) handOver(c net.Conn) {
	if gc, ok := c.(*gatedConn); ok {
		gc.inSession.Store(true)
	}
	select {
	case l.conns <- c:
		l.srv.stats.accepted.Add(1)
	case <-l.done:
		c.Close()
	}
}

// pregreet sends the first line of a multi-line greeting ("220-",
// RFC 5321 §4.2.1) and waits PregreetWait for the client to stay silent,
// as RFC 5321 §3.1 and §4.3.1 require: a client speaks only after the
// whole greeting. A client that sends anything in that time is a bot that
// does not wait (or reads only the first line) and gets 554 5.7.1. It
// reports whether the connection goes on.
func (l *gateListener) pregreet(c *gatedConn, ip netip.Addr) bool {
	s := l.srv
	l.mu.Lock()
	l.waiting[c] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.waiting, c)
		l.mu.Unlock()
	}()
	_ = c.SetWriteDeadline(time.Now().Add(rejectWriteTimeout))
	if _, err := io.WriteString(c, "220-"+s.cfg.Hostname+" ESMTP\r\n"); err != nil {
		c.Close()
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.PregreetWait))
	var b [1]byte
	n, err := c.Read(b[:])
	switch {
	case n > 0:
		s.stats.rejectedPregreet.Add(1)
		s.logger.Info("connection refused: client spoke before the greeting", "ip", ip)
		rejectConn(c, s.cfg.Hostname, replyPregreet)
		return false
	case isTimeout(err):
		_ = c.SetReadDeadline(time.Time{})
		_ = c.SetWriteDeadline(time.Time{})
		return true
	default: // the client left, or Close dropped it
		c.Close()
		return false
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// rejectConn writes a final reply in place of the greeting and closes
// the connection (RFC 5321 §3.1: a 421 or 554 greeting ends the session;
// RFC 2034 §4: the enhanced code follows the reply code).
func rejectConn(c net.Conn, hostname string, reply *smtp.SMTPError) {
	_ = c.SetWriteDeadline(time.Now().Add(rejectWriteTimeout))
	ec := reply.EnhancedCode
	_, _ = fmt.Fprintf(c, "%d %d.%d.%d %s %s\r\n", reply.Code, ec[0], ec[1], ec[2], hostname, reply.Message)
	c.Close()
}

// exempt reports whether a client skips the per-client limits and the
// pregreet test: loopback clients (local tools, benchmarks) unless
// LimitLoopback is set, and the ExemptNetworks.
func (s *Server) exempt(ip netip.Addr) bool {
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

// gatedConn is an admitted connection: it carries the blocklist lookup
// started at connect and gives its limiter slot back when closed.
type gatedConn struct {
	net.Conn
	reputation *dnsbl.Pending
	release    func()
	closed     atomic.Bool
	// inSession is set once go-smtp has the connection: from then on a
	// read deadline that passes ends the session (see Read).
	inSession atomic.Bool
	// pending holds the lines of a multi-line reply not sent yet (see
	// Write); only go-smtp's session goroutine writes once inSession is set.
	pending []byte
}

// maxPendingReply bounds the continuation lines held back by Write.
const maxPendingReply = 4096

// Write sends the lines of a multi-line reply (RFC 5321 §4.2.1: "250-"
// lines and the last "250 " line) in one write. go-smtp flushes every line
// on its own, so the EHLO reply alone took ten system calls and as many
// TCP segments, a third of the server's CPU time for a session that ends
// at RCPT. A continuation line (three digits and a hyphen) is held until
// the next write; after STARTTLS the writes are TLS records, which never
// start with a digit, and pass straight through.
func (c *gatedConn) Write(p []byte) (int, error) {
	if !c.inSession.Load() {
		return c.Conn.Write(p)
	}
	if isContinuationLine(p) && len(c.pending)+len(p) <= maxPendingReply {
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	if len(c.pending) == 0 {
		return c.Conn.Write(p)
	}
	buf := append(c.pending, p...)
	c.pending = c.pending[:0]
	if _, err := c.Conn.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// isContinuationLine reports whether p is one whole non-final line of a
// reply: "ddd-text CRLF".
func isContinuationLine(p []byte) bool {
	return len(p) >= 6 && isDigit(p[0]) && isDigit(p[1]) && isDigit(p[2]) && p[3] == '-' &&
		p[len(p)-2] == '\r' && p[len(p)-1] == '\n'
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// Read ends input for good when a read deadline passes during the
// session. go-smtp reads commands through bufio.Reader.ReadLine, which
// hands back a partial line with a nil error when the deadline passes
// mid-line and drops the timeout; go-smtp then sets a fresh deadline, so a
// client trickling a byte at a time (slowloris) would never be timed out
// and the partial line would be taken as a command. Shutting the read
// side makes the next read see end of input, so the session ends at the
// command timeout (RFC 5321 §4.5.3.2.7) whatever the client trickles.
// Before the hand-over (the pregreet wait) a timeout is the expected,
// good outcome and changes nothing.
func (c *gatedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.inSession.Load() && isTimeout(err) {
		_ = c.CloseRead()
	}
	return n, err
}

func (c *gatedConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.release()
	return c.Conn.Close()
}

// CloseRead lets shutdownRead reach the TCP connection.
func (c *gatedConn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return c.Conn.SetReadDeadline(time.Now())
}

// gatedOf finds the gatedConn under a session's connection (which is a
// *tls.Conn over it after STARTTLS).
func gatedOf(c net.Conn) *gatedConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	gc, _ := c.(*gatedConn)
	return gc
}

// addrOf returns the IP of a network address, or the zero Addr.
func addrOf(a net.Addr) netip.Addr {
	if tcp, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(tcp.IP)
		return ip.Unmap()
	}
	if a == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
