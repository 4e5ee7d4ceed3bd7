package blackbox

import (
	"bufio"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"pimail/internal/metrics"
)

// greeting connects from 127.0.0.(2+src) and returns the first line the
// server sends and, for a refusal, whether the server then closed the
// connection; with hold, the open connection is returned.
func greeting(t *testing.T, src int, addr string, hold bool) (line string, closed bool, c net.Conn) {
	t.Helper()
	c, err := dialFrom(src, addr)
	if err != nil {
		t.Fatalf("dial %s from source %d: %v", addr, src, err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	line, err = r.ReadString('\n')
	if err != nil {
		c.Close()
		t.Fatalf("greeting from %s: %q %v", addr, line, err)
	}
	if hold {
		return line, false, c
	}
	if strings.HasPrefix(line, "* OK") || strings.HasPrefix(line, "+OK") {
		c.Close()
		return line, false, nil
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = r.ReadByte()
	closed = err != nil && !isTimeout(err)
	c.Close()
	return line, closed, nil
}

// TestFloodConnectionRate checks the per-address limits of IMAP and POP3
// with loopback held to them (limit_loopback): a client that opens
// connections faster than connection_rate gets "* BYE [UNAVAILABLE]" /
// "-ERR [SYS/TEMP]" in place of the greeting and is disconnected, while
// another address is still served; a client holding
// max_connections_per_ip sessions is refused another; every refusal is
// logged at WARN with the bare client address, so that a fail2ban filter
// (SECURITY.md) can ban it, and counted in /metrics
// (pimail_connections_refused_total); after a token refills, the limited
// client is served again.
func TestFloodConnectionRate(t *testing.T) {
	const imapRate, popRate, perIP = 12, 6, 4
	srv := NewServer(t, fmt.Sprintf("[imap]\nconnection_rate = %d\nmax_connections_per_ip = %d\nlimit_loopback = true\n"+
		"[pop3]\nconnection_rate = %d\nlimit_loopback = true\n[spam]\nenabled = false\n", imapRate, perIP, popRate))
	l := withListeners(t, "pop3", "http")
	srv.StartWith(l)
	before := scrape(t, l.HTTP)

	type proto struct {
		name, addr, ok, rateRefusal string
		rate, src                   int
	}
	for _, p := range []proto{
		{"imap", srv.IMAP, "* OK", "* BYE [UNAVAILABLE] too many connections from your address, try again later\r\n", imapRate, 60},
		{"pop3", l.POP3, "+OK", "-ERR [SYS/TEMP] too many connections from your address, try again later\r\n", popRate, 61},
	} {
		ip := fmt.Sprintf("127.0.0.%d", 2+p.src)
		// The burst is allowed (a token comes back every minute/rate, so a
		// slow machine may get one more).
		for i := range p.rate {
			if line, _, _ := greeting(t, p.src, p.addr, false); !strings.HasPrefix(line, p.ok) {
				t.Fatalf("%s connection %d of the allowed %d: %q", p.name, i+1, p.rate, line)
			}
		}
		refused := 0
		for range 5 {
			line, closed, _ := greeting(t, p.src, p.addr, false)
			if line == p.rateRefusal {
				refused++
				if !closed {
					t.Errorf("%s: connection refused for its rate left open", p.name)
				}
			} else if !strings.HasPrefix(line, p.ok) {
				t.Fatalf("%s over the rate: %q", p.name, line)
			}
		}
		if refused < 4 {
			t.Fatalf("%s: %d of 5 connections over the rate of %d/min refused", p.name, refused, p.rate)
		}
		// Another address is served.
		if line, _, _ := greeting(t, p.src+10, p.addr, false); !strings.HasPrefix(line, p.ok) {
			t.Fatalf("%s: another address refused: %q", p.name, line)
		}
		logged := regexp.MustCompile(`level=WARN msg="connection refused: rate limit" proto=` + p.name + ` remote=` + regexp.QuoteMeta(ip) + ` `)
		if n := srv.waitLogCount(logged, refused, 5*time.Second); n < refused {
			t.Errorf("%s: %d rate refusals, %d log lines match %s", p.name, refused, n, logged)
		}
		t.Logf("%s: %d connections allowed at once from %s, %d of the next 5 refused", p.name, p.rate, ip, refused)
	}

	// Concurrent sessions of one address (IMAP; the rate is not reached).
	held := make([]net.Conn, 0, perIP)
	defer func() { closeAll(held) }()
	for i := range perIP {
		line, _, c := greeting(t, 80, srv.IMAP, true)
		if !strings.HasPrefix(line, "* OK") {
			t.Fatalf("imap session %d of %d per address: %q", i+1, perIP, line)
		}
		held = append(held, c)
	}
	if line, closed, _ := greeting(t, 80, srv.IMAP, false); line != "* BYE [UNAVAILABLE] too many connections\r\n" || !closed {
		t.Fatalf("imap session over the per-address limit: %q closed=%v", line, closed)
	}
	perAddr := regexp.MustCompile(`level=WARN msg="connection refused: per-address connection limit" proto=imap remote=127\.0\.0\.82 `)
	if srv.waitLogCount(perAddr, 1, 5*time.Second) < 1 {
		t.Error("per-address refusal not logged with the client's address")
	}

	after := scrape(t, l.HTTP)
	for _, c := range []struct {
		proto, reason string
		min           float64
	}{{"imap", "rate", 4}, {"pop3", "rate", 4}, {"imap", "per_address", 1}} {
		lab := map[string]string{"protocol": c.proto, "reason": c.reason}
		if d := metrics.Sum(after, "pimail_connections_refused_total", lab) - metrics.Sum(before, "pimail_connections_refused_total", lab); d < c.min {
			t.Errorf("pimail_connections_refused_total%v grew by %v, want at least %v", lab, d, c.min)
		}
	}

	// A token comes back after a minute/rate (10 s for POP3): the limited
	// address is served again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		line, _, _ := greeting(t, 61, l.POP3, false)
		if strings.HasPrefix(line, "+OK") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pop3 still refused 30 s after the burst: %q", line)
		}
		time.Sleep(time.Second)
	}
}
