package dnsresolver

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// zoneHandler answers from a small fixed zone, like a recursive resolver
// would relay it: with AD set for names under "signed.test.".
func zoneHandler(t *testing.T) func(w dns.ResponseWriter, r *dns.Msg) {
	soa := "test. 600 IN SOA ns.test. admin.test. 1 3600 600 86400 300"
	records := map[string][]string{
		"a.test.|A":            {"a.test. 120 IN A 192.0.2.1", "a.test. 60 IN A 192.0.2.2"},
		"signed.test.|AAAA":    {"signed.test. 300 IN AAAA 2001:db8::5"},
		"txt.test.|TXT":        {`txt.test. 200 IN TXT "v=spf1 " "-all"`},
		"mx.test.|MX":          {"mx.test. 900 IN MX 20 mx2.test.", "mx.test. 900 IN MX 10 mx1.test."},
		"alias.test.|A":        {"alias.test. 30 IN CNAME a.test.", "a.test. 120 IN A 192.0.2.1", "other.test. 5 IN A 198.51.100.9"},
		"nullmx.test.|MX":      {"nullmx.test. 100 IN MX 0 ."},
		"a.test.|TXT":          nil, // NODATA
		"ttlhigh.test.|A":      {"ttlhigh.test. 4294967295 IN A 192.0.2.3"},
		"nodata-nosoa.test.|A": nil,
	}
	return func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		key := strings.ToLower(q.Name) + "|" + dns.TypeToString[q.Qtype]
		rrs, exists := records[key]
		if !exists {
			// The name exists if any type is known for it.
			for k := range records {
				if strings.HasPrefix(k, strings.ToLower(q.Name)+"|") {
					exists = true
				}
			}
		}
		switch {
		case !exists:
			m.Rcode = dns.RcodeNameError
			m.Ns = append(m.Ns, rr(t, soa))
		case len(rrs) == 0 && !strings.HasPrefix(q.Name, "nodata-nosoa"):
			m.Ns = append(m.Ns, rr(t, soa))
		}
		for _, s := range rrs {
			m.Answer = append(m.Answer, rr(t, s))
		}
		m.AuthenticatedData = strings.HasPrefix(q.Name, "signed.") && r.AuthenticatedData
		_ = w.WriteMsg(m)
	}
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLookups(t *testing.T) {
	ts := startServer(t, zoneHandler(t))
	c := newClient(t, Config{Servers: []string{ts.addr}, Timeout: time.Second})
	ctx := context.Background()

	a, res, err := c.LookupA(ctx, "a.test")
	if err != nil || len(a) != 2 || res.NXDomain || res.Authentic || res.TTL != time.Minute {
		t.Fatalf("A: %v %+v %v", a, res, err)
	}
	if a[0].IP != netip.MustParseAddr("192.0.2.1") || a[0].TTL != 2*time.Minute || a[1].TTL != time.Minute {
		t.Fatalf("A records: %+v", a)
	}

	aaaa, res, err := c.LookupAAAA(ctx, "signed.test.")
	if err != nil || len(aaaa) != 1 || !res.Authentic || aaaa[0].IP != netip.MustParseAddr("2001:db8::5") {
		t.Fatalf("AAAA: %v %+v %v", aaaa, res, err)
	}

	txt, res, err := c.LookupTXT(ctx, "txt.test")
	if err != nil || len(txt) != 1 || txt[0].Text != "v=spf1 -all" || len(txt[0].Strings) != 2 || res.TTL != 200*time.Second {
		t.Fatalf("TXT: %+v %+v %v", txt, res, err)
	}

	mx, _, err := c.LookupMX(ctx, "MX.test")
	if err != nil || len(mx) != 2 || mx[0].Host != "mx2.test" || mx[0].Preference != 20 || mx[1].Host != "mx1.test" {
		t.Fatalf("MX: %+v %v", mx, err)
	}
	null, _, err := c.LookupMX(ctx, "nullmx.test")
	if err != nil || len(null) != 1 || null[0].Host != "" {
		t.Fatalf("null MX (RFC 7505): %+v %v", null, err)
	}

	// The CNAME's TTL bounds the answer; unrelated records are ignored.
	alias, res, err := c.LookupA(ctx, "alias.test")
	if err != nil || len(alias) != 1 || alias[0].IP != netip.MustParseAddr("192.0.2.1") || res.TTL != 30*time.Second {
		t.Fatalf("CNAME: %+v %+v %v", alias, res, err)
	}

	// RFC 2181 §8: a TTL with the top bit set counts as zero.
	high, res, err := c.LookupA(ctx, "ttlhigh.test")
	if err != nil || len(high) != 1 || high[0].TTL != 0 || res.TTL != 0 {
		t.Fatalf("huge TTL: %+v %+v %v", high, res, err)
	}
}

func TestNegativeAnswers(t *testing.T) {
	ts := startServer(t, zoneHandler(t))
	c := newClient(t, Config{Servers: []string{ts.addr}, Timeout: time.Second})
	ctx := context.Background()

	// NXDOMAIN: no error, NXDomain set, TTL min(SOA TTL, MINIMUM) (RFC 2308 §5).
	recs, res, err := c.LookupA(ctx, "missing.test")
	if err != nil || len(recs) != 0 || !res.NXDomain || res.TTL != 300*time.Second {
		t.Fatalf("NXDOMAIN: %v %+v %v", recs, res, err)
	}
	// NODATA: the name exists, no records of the type.
	txt, res, err := c.LookupTXT(ctx, "a.test")
	if err != nil || len(txt) != 0 || res.NXDomain || res.TTL != 300*time.Second {
		t.Fatalf("NODATA: %v %+v %v", txt, res, err)
	}
	// Without an SOA there is no negative TTL.
	recs, res, err = c.LookupA(ctx, "nodata-nosoa.test")
	if err != nil || len(recs) != 0 || res.NXDomain || res.TTL != 0 {
		t.Fatalf("NODATA without SOA: %v %+v %v", recs, res, err)
	}
	if _, _, err := c.LookupA(ctx, "bad..name"); err == nil {
		t.Fatal("invalid name accepted")
	}
}

// RFC 7766 §6.1: a truncated UDP answer is asked again over TCP.
func TestTruncationFallsBackToTCP(t *testing.T) {
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if w.LocalAddr().Network() != "tcp" {
			m.Truncated = true
			_ = w.WriteMsg(m)
			return
		}
		for i := 0; i < 100; i++ { // far more than fits in 1232 bytes
			m.Answer = append(m.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: []string{strings.Repeat("x", 100)},
			})
		}
		_ = w.WriteMsg(m)
	})
	c := newClient(t, Config{Servers: []string{ts.addr}, Timeout: time.Second})
	txt, _, err := c.LookupTXT(context.Background(), "big.test")
	if err != nil || len(txt) != 100 {
		t.Fatalf("TCP fallback: %d records, %v", len(txt), err)
	}
	if ts.udpHits.Load() != 1 || ts.tcpHits.Load() != 1 {
		t.Fatalf("udp %d tcp %d queries, want 1 and 1", ts.udpHits.Load(), ts.tcpHits.Load())
	}
}

// A server that answers SERVFAIL is skipped for the next one; when all
// fail, the error says so.
func TestServerFailureAndFailover(t *testing.T) {
	bad := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeServerFailure)
		_ = w.WriteMsg(m)
	})
	good := startServer(t, zoneHandler(t))
	c := newClient(t, Config{Servers: []string{bad.addr, good.addr}, Timeout: time.Second})
	if a, _, err := c.LookupA(context.Background(), "a.test"); err != nil || len(a) != 2 {
		t.Fatalf("failover: %v %v", a, err)
	}
	only := newClient(t, Config{Servers: []string{bad.addr}, Timeout: time.Second, Attempts: 3})
	before := bad.udpHits.Load()
	_, _, err := only.LookupA(context.Background(), "a.test")
	var de *Error
	if !errors.Is(err, ErrServerFailure) || !errors.As(err, &de) || de.Name != "a.test" || de.Type != "A" {
		t.Fatalf("SERVFAIL: %v", err)
	}
	if n := bad.udpHits.Load() - before; n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
}

// A reply for another question (a spoofing attempt, or a confused server)
// is not used.
func TestMismatchedReplyRejected(t *testing.T) {
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Question[0].Name = "elsewhere.test."
		m.Answer = append(m.Answer, rr(t, "elsewhere.test. 60 IN A 192.0.2.66"))
		_ = w.WriteMsg(m)
	})
	c := newClient(t, Config{Servers: []string{ts.addr}, Timeout: time.Second, Attempts: 1})
	if a, _, err := c.LookupA(context.Background(), "a.test"); !errors.Is(err, ErrServerFailure) {
		t.Fatalf("mismatched reply used: %v %v", a, err)
	}
}

// A server that never answers costs Attempts × Timeout, then ErrTimeout.
func TestTimeoutAndRetry(t *testing.T) {
	addr, hits := blackhole(t)
	c := newClient(t, Config{Servers: []string{addr}, Timeout: 100 * time.Millisecond, Attempts: 2})
	start := time.Now()
	_, _, err := c.LookupA(context.Background(), "a.test")
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if took < 190*time.Millisecond || took > 2*time.Second {
		t.Fatalf("took %v, want about 200ms", took)
	}
	deadline := time.Now().Add(time.Second)
	for hits.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if hits.Load() != 2 {
		t.Fatalf("server saw %d queries, want 2 (one retry)", hits.Load())
	}
	// The caller's context bounds the whole lookup.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, _, err := c.LookupA(ctx, "a.test"); !errors.Is(err, ErrTimeout) || time.Since(start) > time.Second {
		t.Fatalf("context deadline: %v after %v", err, time.Since(start))
	}
}

func TestServerAddr(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1": "192.0.2.1:53", "192.0.2.1:5353": "192.0.2.1:5353",
		"2001:db8::1": "[2001:db8::1]:53", "[2001:db8::1]": "[2001:db8::1]:53", "[::1]:54": "[::1]:54",
	} {
		if got, err := serverAddr(in); err != nil || got != want {
			t.Errorf("serverAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "resolver.example", "1.2.3"} {
		if _, err := serverAddr(bad); err == nil {
			t.Errorf("serverAddr(%q) accepted", bad)
		}
	}
}

// HandlerTransport runs a handler in-process: the same answers, no socket.
func TestHandlerTransport(t *testing.T) {
	c := newClient(t, Config{Servers: []string{"127.0.0.1"}, Transport: HandlerTransport{dns.HandlerFunc(zoneHandler(t))}})
	a, res, err := c.LookupA(context.Background(), "a.test")
	if err != nil || len(a) != 2 || res.TTL != time.Minute {
		t.Fatalf("in-process: %v %+v %v", a, res, err)
	}
	_, res, err = c.LookupA(context.Background(), "nope.test")
	if err != nil || !res.NXDomain {
		t.Fatalf("in-process NXDOMAIN: %+v %v", res, err)
	}
}
