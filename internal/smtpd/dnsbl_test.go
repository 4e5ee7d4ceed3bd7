package smtpd

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"pimail/internal/dnsbl"
	"pimail/internal/dnsresolver"
)

// logBuffer collects log output from many goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// blocklists serves two zones on loopback: strict.test (weight 1) lists
// 127.0.0.2 (RFC 5782 §5's test entry, listed by every zone) and
// soft.test (weight 0.5) lists 127.0.0.2 and 127.0.0.7.
func blocklists(t *testing.T) *dnsbl.Checker {
	t.Helper()
	var servers []string
	for _, z := range []struct {
		name    string
		entries []string
	}{{"strict.test", nil}, {"soft.test", []string{"127.0.0.7/32"}}} {
		zs, err := dnsbl.NewZoneServer(dnsbl.ZoneConfig{Name: z.name})
		if err != nil {
			t.Fatal(err)
		}
		var list []netip.Prefix
		for _, e := range z.entries {
			list = append(list, netip.MustParsePrefix(e))
		}
		if err := zs.SetList(list); err != nil {
			t.Fatal(err)
		}
		ep, err := zs.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		servers = append(servers, ep.Addr())
	}
	// Each zone has its own server; zoneResolver sends each query to the
	// server of its zone, as a recursive resolver would.
	res := zoneResolver{}
	for i, name := range []string{"strict.test", "soft.test"} {
		r, err := dnsresolver.New(dnsresolver.Config{Servers: []string{servers[i]}, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		res[name] = r
	}
	c, err := dnsbl.New(dnsbl.Config{
		Resolver:   res,
		Zones:      []dnsbl.Zone{{Name: "strict.test", Weight: 1}, {Name: "soft.test", BitmapName: "bitmap.soft.test", Weight: 0.5}},
		CheckLocal: true,
		Logger:     quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDNSBLRejectsAtRCPT(t *testing.T) {
	var logs logBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e := newEnvLogged(t, Config{DNSBL: blocklists(t)}, nil, logger)

	// Score 1.5 ≥ 1: every recipient refused, known or not, and the
	// session may still QUIT cleanly.
	bad := dialFrom(t, e.addr, "127.0.0.2")
	bad.expect("EHLO bot.test", 250)
	bad.expect("MAIL FROM:<spam@bot.test>", 250)
	for _, rcpt := range []string{"alice@example.com", "nobody@example.com"} {
		code, msg := bad.cmd("RCPT TO:<" + rcpt + ">")
		if code != 554 || msg != "5.7.1 Service unavailable; client [127.0.0.2] blocked using strict.test, soft.test" {
			t.Fatalf("listed client, RCPT %s: %d %q", rcpt, code, msg)
		}
	}
	bad.expect("DATA", 502)
	bad.expect("QUIT", 221)

	// Score 0.5 < 1: accepted, and the score is recorded (and passed to
	// delivery for the spam filter: Envelope.DNSBL, dnsblHits).
	soft := dialFrom(t, e.addr, "127.0.0.7")
	soft.expect("EHLO soft.test", 250)
	if code, msg := soft.transaction("sender@remote.test", []string{"alice@example.com"}, simpleMessage); code != 250 {
		t.Fatalf("client below the threshold: %d %s", code, msg)
	}
	// RFC 5782 §5: 127.0.0.1 is never listed.
	good := dial(t, e.addr)
	good.expect("EHLO client.test", 250)
	if code, msg := good.transaction("sender@remote.test", []string{"bob@example.com"}, simpleMessage); code != 250 {
		t.Fatalf("unlisted client: %d %s", code, msg)
	}
	if n := e.messages(t); n != 2 {
		t.Fatalf("%d messages stored, want 2", n)
	}
	out := logs.String()
	if !strings.Contains(out, "ip=127.0.0.7") || !strings.Contains(out, "score=0.5 lists=[soft.test]") {
		t.Fatalf("score not recorded for the accepted message:\n%s", out)
	}
	if s := e.srv.Stats(); s.RejectedDNSBL != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A blocklist server that never answers delays only the sessions that
// ask for a verdict, by a bounded time, and then counts as "not listed".
func TestDNSBLTimeoutDegrades(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	res, err := dnsresolver.New(dnsresolver.Config{Servers: []string{pc.LocalAddr().String()}, Timeout: 100 * time.Millisecond, Attempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	const bound = 400 * time.Millisecond
	checker, err := dnsbl.New(dnsbl.Config{Resolver: res, Zones: []dnsbl.Zone{{Name: "dead.test"}}, CheckLocal: true, Timeout: bound, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{DNSBL: checker})
	waiting := dial(t, e.addr)
	waiting.expect("EHLO client.test", 250)
	waiting.expect("MAIL FROM:<sender@remote.test>", 250)
	start := time.Now()
	waiting.send("RCPT TO:<alice@example.com>\r\n")

	// Meanwhile another session is served at once.
	other := dial(t, e.addr)
	t0 := time.Now()
	other.expect("EHLO other.test", 250)
	other.expect("NOOP", 250)
	if took := time.Since(t0); took > bound/2 {
		t.Fatalf("an unrelated session waited %v", took)
	}

	waiting.expectReply(250, "RCPT with a dead blocklist")
	if took := time.Since(start); took > bound+time.Second {
		t.Fatalf("RCPT waited %v, bound is %v", took, bound)
	}
	waiting.expect("DATA", 354)
	waiting.send(simpleMessage + ".\r\n")
	waiting.expectReply(250, "end of data")
	if s := checker.Stats(); s.Timeouts == 0 {
		t.Fatalf("checker stats %+v: no timeout counted", s)
	}
}
