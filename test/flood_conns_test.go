package blackbox

import (
	"bufio"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// floodConfig lifts the total-connection limits (SMTP 300, IMAP 1,000,
// POP3 200 by default) above the flood size, so the test measures what
// 1,000 open sessions cost rather than the refusal of the 301st; loopback
// clients are exempt from the per-IP limits, which the servers' unit
// tests cover. TestFloodConnectionLimits checks the limits themselves.
const floodConfig = "[smtp]\nmax_connections = 5000\n[imap]\nmax_connections = 5000\n" +
	"[pop3]\nmax_connections = 5000\n[spam]\nenabled = false\n"

// raiseNoFile lifts this process's open-file limit to its hard limit (the
// server, started later, inherits it) and skips when that is below need.
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatalf("setrlimit: %v", err)
		}
	}
	if rl.Cur < need {
		t.Skipf("RLIMIT_NOFILE hard limit %d is below the %d this test needs", rl.Max, need)
	}
}

// dialFrom connects to addr from the loopback source 127.0.0.(2+n%200),
// spreading a flood over many client addresses.
func dialFrom(n int, addr string) (net.Conn, error) {
	d := net.Dialer{
		Timeout:   10 * time.Second,
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+n%200))},
	}
	return d.Dial("tcp", addr)
}

// openIdle opens n connections to addr and reads each greeting, which
// must start with want. It returns the open connections; the caller
// closes them.
func openIdle(t *testing.T, addr string, n int, want string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := dialFrom(i, addr)
			if err != nil {
				errs <- err
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, want) {
				c.Close()
				errs <- fmt.Errorf("greeting %q: %v", line, err)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 3 {
			t.Errorf("open idle connection to %s: %v", addr, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d idle connections to %s failed", failed, n, addr)
	}
	return conns
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// probe is one ordinary client visit to every protocol: an SMTP delivery,
// an IMAP login with a SELECT and a FETCH, a POP3 login with STAT. It
// returns how long each took.
func probe(t *testing.T, srv *Server, l Listeners, user string) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	start := time.Now()
	s := dialSMTP(t, srv.SMTP)
	s.send("sender@example.org", []string{user}, generatedMessage("probe", int(start.UnixNano()%1000), 2000))
	s.expect("QUIT", 221)
	out["smtp"] = time.Since(start)

	start = time.Now()
	ic := dialIMAP(t, srv.IMAP)
	ic.login(user)
	ic.expectStatus("p1", "SELECT INBOX", "OK")
	ic.expectStatus("p2", "FETCH 1:* (FLAGS ENVELOPE)", "OK")
	ic.expectStatus("p3", "LOGOUT", "OK")
	out["imap"] = time.Since(start)

	if l.POP3 != "" {
		start = time.Now()
		p := dialPOP3(t, l.POP3)
		p.expectOK("USER " + user)
		p.expectOK("PASS " + testPassword)
		p.expectOK("STAT")
		p.expectOK("QUIT")
		out["pop3"] = time.Since(start)
	}
	return out
}

// TestFloodIdleConnections opens 1,000 idle connections (a third each on
// SMTP, IMAP and POP3, from 200 loopback addresses) and checks that the
// server's memory stays bounded and an ordinary client still gets
// service, reporting its latency.
func TestFloodIdleConnections(t *testing.T) {
	total := pick(1000, 3000)
	raiseNoFile(t, uint64(total)*2+200)
	srv := NewServer(t, floodConfig)
	user := srv.AddAccounts("flooded")[0]
	l := withListeners(t, "pop3")
	srv.StartWith(l)
	base := warmRSS(t, srv, user)
	quiet := probe(t, srv, l, user)
	t.Logf("probe latency before the flood: %v", quiet)

	per := total / 3
	start := time.Now()
	smtpConns := openIdle(t, srv.SMTP, per, "220 ")
	defer closeAll(smtpConns)
	imapConns := openIdle(t, srv.IMAP, per, "* OK")
	defer closeAll(imapConns)
	popConns := openIdle(t, l.POP3, total-2*per, "+OK")
	defer closeAll(popConns)
	t.Logf("%d idle connections open in %v", total, time.Since(start).Round(time.Millisecond))

	lat := probe(t, srv, l, user)
	t.Logf("probe latency with %d idle connections: %v", total, lat)
	for proto, d := range lat {
		// Generous: a stalled accept loop or a lock held by idle
		// sessions shows as seconds, not milliseconds.
		if d > 10*time.Second {
			t.Errorf("%s probe took %v with %d idle connections", proto, d, total)
		}
	}
	time.Sleep(200 * time.Millisecond)
	rss, hwm := srv.RSSKiB(), srv.HWMKiB()
	perConn := (rss - base) * 1024 / int64(total)
	t.Logf("RSS %d KiB with %d idle connections (base %d KiB, +%d bytes per connection), peak %d KiB",
		rss, total, base, perConn, hwm)
	// An idle session is a goroutine with small buffers; 64 KiB each
	// would already be 64 MiB per thousand idle clients on a Pi.
	if perConn > 64<<10 {
		t.Errorf("%d bytes of RSS per idle connection (limit 64 KiB)", perConn)
	}
	closeAll(smtpConns)
	closeAll(imapConns)
	closeAll(popConns)
	lat = probe(t, srv, l, user)
	t.Logf("probe latency after the flood: %v", lat)
}

// TestFloodConnectionLimits opens more IMAP and POP3 connections than
// their configured total limits: the connections over the limit get
// "* BYE [UNAVAILABLE]" (RFC 9051 §7.1) or "-ERR [SYS/TEMP]" (RFC 3206)
// and are closed at once, the admitted ones stay usable, and once the
// flood closes an ordinary client is served again. (The per-address
// limits do not apply to loopback clients; the unit tests of
// internal/imapd and internal/pop3d cover them.)
func TestFloodConnectionLimits(t *testing.T) {
	const imapMax, popMax = 40, 20
	extra := pick(60, 400)
	raiseNoFile(t, uint64(imapMax+popMax+2*extra)*2+200)
	srv := NewServer(t, fmt.Sprintf("[imap]\nmax_connections = %d\n[pop3]\nmax_connections = %d\n[spam]\nenabled = false\n", imapMax, popMax))
	user := srv.AddAccounts("limited")[0]
	l := withListeners(t, "pop3")
	srv.StartWith(l)
	for _, c := range []struct {
		proto, addr, ok, refused string
		max                      int
	}{
		{"imap", srv.IMAP, "* OK", "* BYE [UNAVAILABLE] too many connections\r\n", imapMax},
		{"pop3", l.POP3, "+OK", "-ERR [SYS/TEMP] too many connections\r\n", popMax},
	} {
		held := openIdle(t, c.addr, c.max, c.ok)
		start := time.Now()
		refused := 0
		for i := range extra {
			conn, err := dialFrom(i, c.addr)
			if err != nil {
				t.Fatalf("%s: dial over the limit: %v", c.proto, err)
			}
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(conn)
			line, err := r.ReadString('\n')
			if err != nil || line != c.refused {
				conn.Close()
				t.Fatalf("%s connection %d over the limit of %d: %q %v", c.proto, i+1, c.max, line, err)
			}
			if _, err := r.ReadByte(); err == nil {
				t.Fatalf("%s: refused connection not closed", c.proto)
			}
			conn.Close()
			refused++
		}
		t.Logf("%s: %d held, %d more refused in %v", c.proto, c.max, refused, time.Since(start).Round(time.Millisecond))
		// The admitted connections still work.
		_ = held[0].SetDeadline(time.Now().Add(10 * time.Second))
		cmd, want := "n1 NOOP\r\n", "n1 OK"
		if c.proto == "pop3" {
			cmd, want = "CAPA\r\n", "+OK"
		}
		if _, err := held[0].Write([]byte(cmd)); err != nil {
			t.Fatalf("%s: held connection: %v", c.proto, err)
		}
		r := bufio.NewReader(held[0])
		var line string
		for range 10 {
			var err error
			if line, err = r.ReadString('\n'); err != nil || strings.HasPrefix(line, want) {
				break
			}
		}
		if !strings.HasPrefix(line, want) {
			t.Fatalf("%s: held connection answered %q", c.proto, line)
		}
		closeAll(held)
	}
	// Slots come back when the flood closes (the server notices each
	// close on its next read, at once for idle sessions).
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", l.POP3)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.HasPrefix(line, "+OK") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pop3 still refused 20 s after the flood closed: %q", line)
		}
		time.Sleep(50 * time.Millisecond)
	}
	lat := probe(t, srv, l, user)
	t.Logf("probe latency after the flood: %v", lat)
	if n := len(srv.logLines(regexp.MustCompile(`connection refused: server connection limit`))); n == 0 {
		t.Error("no refusal logged")
	}
}
