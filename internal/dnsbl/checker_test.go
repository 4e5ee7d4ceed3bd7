package dnsbl

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

func newChecker(t *testing.T, cfg Config) *Checker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestCheckerScore(t *testing.T) {
	zs1, err := NewZoneServer(ZoneConfig{Name: "one.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := zs1.SetList(prefixes(t, "192.0.2.1", "192.0.2.2", "2001:db8::1")); err != nil {
		t.Fatal(err)
	}
	zs2, err := NewZoneServer(ZoneConfig{Name: "two.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := zs2.SetList(prefixes(t, "192.0.2.2")); err != nil {
		t.Fatal(err)
	}
	// Both zones behind one resolver: a mux, as a recursive resolver is.
	mux := dns.NewServeMux()
	mux.Handle("one.test.", zs1)
	mux.Handle("two.test.", zs2)
	local, err := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: mux}})
	if err != nil {
		t.Fatal(err)
	}
	c := newChecker(t, Config{Resolver: local, Zones: []Zone{{Name: "one.test", Weight: 0.5}, {Name: "two.test.", BitmapName: "bitmap.two.test", Weight: 2}}})
	ctx := context.Background()
	for addr, want := range map[string]float64{"192.0.2.1": 0.5, "192.0.2.2": 2.5, "192.0.2.3": 0, "2001:db8::1": 0.5, "2001:db8::2": 0} {
		v := c.Check(ctx, ip(addr))
		if v.Score != want || v.Incomplete {
			t.Errorf("%s: %+v, want score %v", addr, v, want)
		}
	}
	if v := c.Check(ctx, ip("192.0.2.2")); len(v.Listed) != 2 || v.Listed[0] != "one.test" || v.Listed[1] != "two.test" ||
		len(v.Hits) != 2 || v.Hits[1] != (Hit{"two.test", 2}) {
		t.Errorf("Listed = %v, Hits = %v", v.Listed, v.Hits)
	}
}

// One query per address for an ordinary zone; one per /25 for a bitmap
// zone; answers expire with their TTL, negative ones with the SOA's.
func TestCheckerCaching(t *testing.T) {
	_, res := startZone(t, ZoneConfig{Name: "bl.test", TTL: time.Hour, NegativeTTL: 10 * time.Minute}, "10.0.0.5", "10.0.0.6")
	clk := newClock()
	perIP := newChecker(t, Config{Resolver: res, Zones: []Zone{{Name: "bl.test"}}, CheckLocal: true, Now: clk.Now})
	prefix := newChecker(t, Config{Resolver: res, Zones: []Zone{{BitmapName: "bitmap.bl.test"}}, CheckLocal: true, Now: clk.Now})
	ctx := context.Background()
	for i := 1; i <= 8; i++ {
		addr := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
		want := i == 5 || i == 6
		for _, c := range []*Checker{perIP, prefix, perIP, prefix} { // each twice
			if v := c.Check(ctx, addr); (v.Score > 0) != want || v.Incomplete {
				t.Fatalf("%v: %+v, want listed=%v", addr, v, want)
			}
		}
	}
	if s := perIP.Stats(); s.Queries != 8 || s.CacheHits != 8 || s.Lookups != 16 || s.HitRatio() != 0.5 || s.Entries != 8 {
		t.Fatalf("per-IP stats %+v", s)
	}
	if s := prefix.Stats(); s.Queries != 1 || s.CacheHits != 15 || s.Entries != 1 {
		t.Fatalf("prefix stats %+v", s)
	}
	// The upper half of the /24 is another /25: NXDOMAIN, cached too.
	if v := prefix.Check(ctx, ip("10.0.0.200")); v.Score != 0 {
		t.Fatal("10.0.0.200 listed")
	}
	prefix.Check(ctx, ip("10.0.0.201"))
	if s := prefix.Stats(); s.Queries != 2 {
		t.Fatalf("upper /25: %d queries, want 2", s.Queries)
	}
	// After the negative TTL (10 min) the unlisted answers are asked
	// again; the positive ones (1 h) are still cached.
	clk.Advance(11 * time.Minute)
	perIP.Check(ctx, ip("10.0.0.5"))
	perIP.Check(ctx, ip("10.0.0.1"))
	if s := perIP.Stats(); s.Queries != 9 {
		t.Fatalf("after the negative TTL: %d queries, want 9", s.Queries)
	}
	prefix.Check(ctx, ip("10.0.0.200"))
	prefix.Check(ctx, ip("10.0.0.1"))
	if s := prefix.Stats(); s.Queries != 3 {
		t.Fatalf("prefix after the negative TTL: %d queries, want 3", s.Queries)
	}
	clk.Advance(time.Hour)
	perIP.Check(ctx, ip("10.0.0.5"))
	if s := perIP.Stats(); s.Queries != 10 {
		t.Fatalf("after the TTL: %d queries, want 10", s.Queries)
	}
}

// A negative answer without an SOA is cached for NegativeTTL; TTLs are
// clamped to MinTTL.
func TestCheckerTTLBounds(t *testing.T) {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Name == "2.0.0.10.bl.test." {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.IPv4(127, 0, 0, 2)})
		} else {
			m.Rcode = dns.RcodeNameError // and no SOA
		}
		_ = w.WriteMsg(m)
	})
	res, _ := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: h}})
	clk := newClock()
	c := newChecker(t, Config{Resolver: res, Zones: []Zone{{Name: "bl.test"}}, CheckLocal: true, Now: clk.Now,
		MinTTL: time.Minute, NegativeTTL: 3 * time.Minute})
	ctx := context.Background()
	c.Check(ctx, ip("10.0.0.1"))
	c.Check(ctx, ip("10.0.0.2"))
	clk.Advance(59 * time.Second)
	c.Check(ctx, ip("10.0.0.1"))
	if v := c.Check(ctx, ip("10.0.0.2")); v.Score != 1 {
		t.Fatal("TTL-0 listing not cached as listed")
	}
	if s := c.Stats(); s.Queries != 2 {
		t.Fatalf("%d queries within MinTTL, want 2", s.Queries)
	}
	clk.Advance(2 * time.Second) // past MinTTL, within NegativeTTL
	c.Check(ctx, ip("10.0.0.1"))
	c.Check(ctx, ip("10.0.0.2"))
	if s := c.Stats(); s.Queries != 3 {
		t.Fatalf("%d queries, want 3 (only the TTL-0 listing asked again)", s.Queries)
	}
}

// Lookups of one /25 that overlap share one query.
func TestCheckerCoalesces(t *testing.T) {
	zs, err := NewZoneServer(ZoneConfig{Name: "bl.test"})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: slowHandler{zs, 100 * time.Millisecond}}})
	c := newChecker(t, Config{Resolver: res, Zones: []Zone{{BitmapName: "bitmap.bl.test"}}, CheckLocal: true})
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Check(context.Background(), netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}))
		}()
	}
	wg.Wait()
	s := c.Stats()
	if s.Queries != 1 || s.Coalesced+s.CacheHits != 19 {
		t.Fatalf("stats %+v, want 1 query shared by 20 lookups", s)
	}
}

// A zone that never answers costs one bounded wait and counts as "not
// listed"; it does not hold up checks answered from the cache or other
// zones' answers.
func TestCheckerTimeoutDegrades(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	dead, _ := dnsresolver.New(dnsresolver.Config{Servers: []string{pc.LocalAddr().String()}, Timeout: 50 * time.Millisecond, Attempts: 1})
	c := newChecker(t, Config{Resolver: dead, Zones: []Zone{{Name: "bl.test"}}, CheckLocal: true, Timeout: 150 * time.Millisecond})
	start := time.Now()
	p := c.Start(ip("10.0.0.1"))
	if since := time.Since(start); since > 20*time.Millisecond {
		t.Fatalf("Start blocked for %v", since)
	}
	v := p.Wait(context.Background())
	took := time.Since(start)
	if v.Score != 0 || !v.Incomplete || took > time.Second {
		t.Fatalf("dead zone: %+v after %v", v, took)
	}
	if s := c.Stats(); s.Timeouts != 1 || s.Entries != 0 {
		t.Fatalf("stats %+v: a failed lookup must be counted and not cached", s)
	}
	// The caller's context can end the wait sooner.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start = time.Now()
	if v := c.Start(ip("10.0.0.2")).Wait(ctx); !v.Incomplete || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("context wait: %+v after %v", v, time.Since(start))
	}
}

func TestCheckerExemptAndBogusAnswers(t *testing.T) {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		// A resolver that "helpfully" answers every name with its own
		// address (NXDOMAIN rewriting): not a listing (RFC 5782 §2.1).
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(198, 51, 100, 1)})
		_ = w.WriteMsg(m)
	})
	res, _ := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: h}})
	c := newChecker(t, Config{Resolver: res, Zones: []Zone{{Name: "bl.test"}}})
	ctx := context.Background()
	if v := c.Check(ctx, ip("203.0.113.9")); v.Score != 0 || v.Incomplete {
		t.Fatalf("bogus answer counted: %+v", v)
	}
	for _, local := range []string{"127.0.0.1", "10.1.2.3", "192.168.1.1", "100.64.0.1", "fe80::1", "fd00::1", "::1"} {
		if v := c.Check(ctx, ip(local)); v.Score != 0 || v.Incomplete {
			t.Fatalf("%s: %+v", local, v)
		}
	}
	if s := c.Stats(); s.Skipped != 7 || s.Queries != 1 {
		t.Fatalf("stats %+v, want 7 skipped and 1 query", s)
	}
	var nilPending *Pending
	if v := nilPending.Wait(ctx); v.Score != 0 {
		t.Fatal("nil Pending")
	}
	<-nilPending.Done()
}

func TestCheckerCacheBound(t *testing.T) {
	zs, _ := NewZoneServer(ZoneConfig{Name: "bl.test"})
	res, _ := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: zs}})
	c := newChecker(t, Config{Resolver: res, Zones: []Zone{{Name: "bl.test"}}, CheckLocal: true, MaxEntries: 100})
	for i := 0; i < 1000; i++ {
		c.Check(context.Background(), netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
	}
	if s := c.Stats(); s.Entries > 100 || s.Evicted == 0 || s.Queries != 1000 {
		t.Fatalf("stats %+v", s)
	}
}

func TestNewValidates(t *testing.T) {
	res, _ := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}})
	for _, cfg := range []Config{
		{Zones: []Zone{{Name: "bl.test"}}},
		{Resolver: res},
		{Resolver: res, Zones: []Zone{{}}},
		{Resolver: res, Zones: []Zone{{Name: "bad..zone"}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
