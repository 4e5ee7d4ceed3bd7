package smtpserver

import (
	"net"
	"net/netip"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"pimail/internal/metrics"
)

// A client that talks before the greeting is refused with 554 5.7.1.
func TestPregreetRejected(t *testing.T) {
	e := newEnv(t, Config{PregreetWait: 300 * time.Millisecond, LimitLoopback: true})
	before := refusedConns("pregreet")
	c := connect(t, e.addr, "")
	line, err := c.r.ReadLine()
	if err != nil || !strings.HasPrefix(line, "220-mx.example.com ESMTP") {
		t.Fatalf("first greeting line %q, %v", line, err)
	}
	c.send("EHLO bot.test\r\nMAIL FROM:<spam@bot.test>\r\n")
	code, msg := c.reply()
	if code != 554 || !strings.HasPrefix(msg, "5.7.1 mx.example.com ") {
		t.Fatalf("pregreet reply %d %s, want 554 5.7.1", code, msg)
	}
	c.expectClosed()
	if n := refusedConns("pregreet") - before; n != 1 {
		t.Fatalf("%d pregreet refusals counted", n)
	}
	// The refused connection gave its slot back.
	waitActive(t, e, 0)
}

// A client that waits gets the whole greeting after the wait and is served;
// net/smtp reads the multi-line greeting as one reply.
func TestPregreetPatientClient(t *testing.T) {
	const wait = 200 * time.Millisecond
	e := newEnv(t, Config{PregreetWait: wait, LimitLoopback: true})
	before := refusedConns("pregreet")
	start := time.Now()
	c := dial(t, e.addr)
	if took := time.Since(start); took < wait {
		t.Fatalf("greeting complete after %v, before the %v wait", took, wait)
	}
	c.expect("EHLO client.test", 250)
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, simpleMessage); code != 250 {
		t.Fatalf("transaction: %d %s", code, msg)
	}
	cl, err := smtp.Dial(e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Hello("client.test"); err != nil {
		t.Fatalf("net/smtp after a multi-line greeting: %v", err)
	}
	if err := cl.Quit(); err != nil {
		t.Fatal(err)
	}
	if n := refusedConns("pregreet") - before; n != 0 {
		t.Fatalf("%d pregreet refusals counted", n)
	}
}

// Close does not wait for connections still in the pregreet wait.
func TestCloseDuringPregreet(t *testing.T) {
	e := newEnv(t, Config{PregreetWait: 30 * time.Second, LimitLoopback: true})
	c := connect(t, e.addr, "")
	if line, err := c.r.ReadLine(); err != nil || !strings.HasPrefix(line, "220-") {
		t.Fatalf("first line %q %v", line, err)
	}
	start := time.Now()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v", took)
	}
}

// RFC 5321 §3.1: a client over the per-client limit gets 421 in place of
// the greeting; another client is not affected; a slot comes back when a
// connection closes.
func TestPerClientConnectionLimit(t *testing.T) {
	e := newEnv(t, Config{MaxConnectionsPerIP: 2, LimitLoopback: true})
	before := refusedConns(metrics.RefusePerAddress)
	a1 := dialFrom(t, e.addr, "127.0.0.1")
	dialFrom(t, e.addr, "127.0.0.1")
	over := connect(t, e.addr, "127.0.0.1")
	if code, msg := over.reply(); code != 421 || !strings.HasPrefix(msg, "4.7.0 mx.example.com ") {
		t.Fatalf("third connection: %d %s, want 421 4.7.0", code, msg)
	}
	over.expectClosed()
	other := dialFrom(t, e.addr, "127.0.0.3")
	other.expect("EHLO other.test", 250)
	a1.expect("QUIT", 221)
	a1.expectClosed()
	waitActive(t, e, 2)
	dialFrom(t, e.addr, "127.0.0.1").expect("NOOP", 250)
	if n := refusedConns(metrics.RefusePerAddress) - before; n != 1 {
		t.Fatalf("%d per-address refusals counted", n)
	}
}

func TestTotalConnectionLimit(t *testing.T) {
	e := newEnv(t, Config{MaxConnections: 2})
	before := refusedConns(metrics.RefuseTotal)
	dialFrom(t, e.addr, "127.0.0.1")
	dialFrom(t, e.addr, "127.0.0.4")
	over := connect(t, e.addr, "127.0.0.5")
	if code, msg := over.reply(); code != 421 || !strings.HasPrefix(msg, "4.7.0 ") {
		t.Fatalf("over the total: %d %s", code, msg)
	}
	over.expectClosed()
	if n := refusedConns(metrics.RefuseTotal) - before; n != 1 {
		t.Fatalf("%d refusals counted", n)
	}
	waitActive(t, e, 2)
}

func TestConnectionRateLimit(t *testing.T) {
	e := newEnv(t, Config{ConnectionRate: 3, ConnectionRateWindow: time.Hour, LimitLoopback: true})
	before := refusedConns(metrics.RefuseRate)
	for i := 0; i < 3; i++ {
		c := dialFrom(t, e.addr, "127.0.0.1")
		c.expect("QUIT", 221)
	}
	over := connect(t, e.addr, "127.0.0.1")
	if code, msg := over.reply(); code != 421 || !strings.Contains(msg, "rate") {
		t.Fatalf("fourth connection in the window: %d %s", code, msg)
	}
	over.expectClosed()
	dialFrom(t, e.addr, "127.0.0.6").expect("NOOP", 250)
	if n := refusedConns(metrics.RefuseRate) - before; n != 1 {
		t.Fatalf("%d rate refusals counted", n)
	}
}

// waitActive waits (bounded) until the server counts n open connections.
func waitActive(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for e.srv.net.Active() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", e.srv.net.Active(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Loopback clients (local tools, benchmarks) and ExemptNetworks skip the
// per-client limits and the pregreet test, but not the total limit.
func TestExemptClients(t *testing.T) {
	e := newEnv(t, Config{MaxConnectionsPerIP: 1, ConnectionRate: 1, MaxConnections: 4, PregreetWait: 10 * time.Second,
		ExemptNetworks: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	start := time.Now()
	for i := 0; i < 4; i++ {
		dialFrom(t, e.addr, "127.0.0.1").expect("NOOP", 250)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("loopback clients waited %v: the pregreet test applied", took)
	}
	over := connect(t, e.addr, "127.0.0.1")
	if code, _ := over.reply(); code != 421 {
		t.Fatalf("fifth connection: %d, want 421 (the total limit holds)", code)
	}
	if !e.srv.net.Exempt(netip.MustParseAddr("192.0.2.9")) || e.srv.net.Exempt(netip.MustParseAddr("198.51.100.1")) {
		t.Fatal("ExemptNetworks not applied")
	}
}

// writeLog is a net.Conn that records each Write it is given.
type writeLog struct {
	net.Conn
	in     *strings.Reader
	writes []string
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *writeLog) Read(p []byte) (int, error)       { return w.in.Read(p) }
func (w *writeLog) SetReadDeadline(time.Time) error  { return nil }
func (w *writeLog) SetWriteDeadline(time.Time) error { return nil }

// The replies to pipelined commands leave in one write (RFC 2920 §3), the
// lines of EHLO's reply together: a session refused at RCPT costs a few
// system calls, not one per line.
func TestRepliesBatched(t *testing.T) {
	e := newEnv(t, Config{})
	log := &writeLog{in: strings.NewReader("EHLO a.test\r\nMAIL FROM:<a@b.test>\r\nRCPT TO:<nobody@example.com>\r\nQUIT\r\n")}
	s := &session{srv: e.srv, c: newConn(log, time.Second, time.Second)}
	s.loop()
	if len(log.writes) != 1 || !strings.HasPrefix(log.writes[0], "250-mx.example.com\r\n250-PIPELINING\r\n") ||
		!strings.Contains(log.writes[0], "\r\n550 5.1.1 ") || !strings.HasSuffix(log.writes[0], "221 2.0.0 Bye\r\n") {
		t.Fatalf("writes %q", log.writes)
	}
}
