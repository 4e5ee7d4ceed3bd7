package dnsbl

import (
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func prefixes(t *testing.T, entries ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, e := range entries {
		p, err := parseEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// startZone serves a list on a random loopback port and returns the zone
// server and a resolver client pointed at it.
func startZone(t *testing.T, cfg ZoneConfig, entries ...string) (*ZoneServer, *dnsresolver.Client) {
	t.Helper()
	zs, err := NewZoneServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := zs.SetList(prefixes(t, entries...)); err != nil {
		t.Fatal(err)
	}
	ep, err := zs.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	res, err := dnsresolver.New(dnsresolver.Config{Servers: []string{ep.Addr()}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return zs, res
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// slowHandler delays every answer of h, to make lookups overlap.
type slowHandler struct {
	h     dns.Handler
	delay time.Duration
}

func (s slowHandler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	time.Sleep(s.delay)
	s.h.ServeDNS(w, r)
}
