package smtpd

import (
	"net"
	"net/netip"
	"net/smtp"
	"slices"
	"strings"
	"testing"
	"time"
)

// A client that talks before the greeting is refused with 554 5.7.1.
func TestPregreetRejected(t *testing.T) {
	e := newEnv(t, Config{PregreetWait: 300 * time.Millisecond, LimitLoopback: true})
	c := connect(t, e.addr, "")
	line, err := c.r.ReadLine()
	if err != nil || line != "220-mx.example.com ESMTP" {
		t.Fatalf("first greeting line %q, %v", line, err)
	}
	c.send("EHLO bot.test\r\nMAIL FROM:<spam@bot.test>\r\n")
	code, msg := c.reply()
	if code != 554 || !strings.HasPrefix(msg, "5.7.1 mx.example.com ") {
		t.Fatalf("pregreet reply %d %s, want 554 5.7.1", code, msg)
	}
	c.expectClosed()
	if s := e.srv.Stats(); s.RejectedPregreet != 1 || s.Accepted != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The refused connection gave its slot back.
	waitActive(t, e, 0)
}

// A client that waits gets the whole greeting after the wait and is served;
// net/smtp reads the multi-line greeting as one reply.
func TestPregreetPatientClient(t *testing.T) {
	const wait = 200 * time.Millisecond
	e := newEnv(t, Config{PregreetWait: wait, LimitLoopback: true})
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
	if s := e.srv.Stats(); s.Accepted != 2 || s.RejectedPregreet != 0 {
		t.Fatalf("stats %+v", s)
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
	if s := e.srv.Stats(); s.RejectedPerIP != 1 || s.Accepted != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestTotalConnectionLimit(t *testing.T) {
	e := newEnv(t, Config{MaxConnections: 2})
	dialFrom(t, e.addr, "127.0.0.1")
	dialFrom(t, e.addr, "127.0.0.4")
	over := connect(t, e.addr, "127.0.0.5")
	if code, msg := over.reply(); code != 421 || !strings.HasPrefix(msg, "4.7.0 ") {
		t.Fatalf("over the total: %d %s", code, msg)
	}
	over.expectClosed()
	if s := e.srv.Stats(); s.RejectedTotal != 1 || s.Active != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestConnectionRateLimit(t *testing.T) {
	e := newEnv(t, Config{ConnectionRate: 3, ConnectionRateWindow: time.Hour, LimitLoopback: true})
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
	if s := e.srv.Stats(); s.RejectedRate != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// waitActive waits (bounded) until the server counts n open connections.
func waitActive(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for e.srv.Stats().Active != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", e.srv.Stats().Active, n)
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
	if !e.srv.exempt(netip.MustParseAddr("192.0.2.9")) || e.srv.exempt(netip.MustParseAddr("198.51.100.1")) {
		t.Fatal("ExemptNetworks not applied")
	}
}

// writeLog is a net.Conn that records each Write it is given.
type writeLog struct {
	net.Conn
	writes []string
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// The lines of a multi-line reply leave in one write; single-line replies,
// TLS records and anything written before the session are not held back.
func TestGatedConnCoalescesReplyLines(t *testing.T) {
	log := &writeLog{}
	gc := &gatedConn{Conn: log}
	gc.Write([]byte("220-mx.example.com ESMTP\r\n")) // pregreet: before the session
	gc.inSession.Store(true)
	for _, l := range []string{"250-mx.example.com\r\n", "250-PIPELINING\r\n", "250 SMTPUTF8\r\n", "250 2.0.0 OK\r\n", "\x17\x03\x03\x00\x05-abc\r\n"} {
		if n, err := gc.Write([]byte(l)); n != len(l) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", l, n, err)
		}
	}
	want := []string{"220-mx.example.com ESMTP\r\n", "250-mx.example.com\r\n250-PIPELINING\r\n250 SMTPUTF8\r\n", "250 2.0.0 OK\r\n", "\x17\x03\x03\x00\x05-abc\r\n"}
	if !slices.Equal(log.writes, want) {
		t.Fatalf("writes %q, want %q", log.writes, want)
	}
}
