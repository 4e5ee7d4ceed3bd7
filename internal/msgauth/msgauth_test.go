package msgauth

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/authres"
	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

func checker(t *testing.T, r Resolver, timeout time.Duration) *Checker {
	t.Helper()
	c, err := New(Config{Resolver: r, AuthservID: "mx.b.test", Timeout: timeout, Sample: func() int { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckSignedMessage(t *testing.T) {
	key, rec := edKey(t)
	z := newZone(t,
		txt("a.test", "v=spf1 ip4:127.0.0.0/8 -all"),
		txt("sel._domainkey.a.test", rec),
		txt("_dmarc.a.test", "v=DMARC1; p=reject"),
	)
	c := checker(t, z.resolver(t), 0)
	msg := "Received: from mx.a.test by mx.b.test; Mon, 2 Jan 2006 15:04:05 +0000\r\n" + sign(t, plainMsg, "a.test", "sel", key)
	res := c.Check(context.Background(), Input{Raw: []byte(msg), RemoteIP: "127.0.0.1", Helo: "mx.a.test", MailFrom: "alice@a.test"})
	v, ok := res.DMARCVerdict()
	if res.SPF.Result != "pass" || res.DKIMSummary() != "pass" || !ok || v.Result != "pass" || v.Policy != "reject" {
		t.Fatalf("results: %+v", res)
	}
	// The header parses back (RFC 8601 grammar) to the same verdicts.
	name, value, _ := strings.Cut(strings.TrimSuffix(res.Header, "\r\n"), ":")
	if name != "Authentication-Results" || strings.Contains(value, "\n\n") {
		t.Fatalf("header %q", res.Header)
	}
	id, results, err := authres.Parse(unfold([]byte(value)))
	if err != nil || id != "mx.b.test" || len(results) != 3 {
		t.Fatalf("parse %q: id %q, %d results, %v", res.Header, id, len(results), err)
	}
	spf, ok1 := results[0].(*authres.SPFResult)
	dk, ok2 := results[1].(*authres.DKIMResult)
	dm, ok3 := results[2].(*authres.DMARCResult)
	if !ok1 || !ok2 || !ok3 || spf.Value != "pass" || spf.From != "alice@a.test" ||
		dk.Value != "pass" || dk.Domain != "a.test" || dm.Value != "pass" || dm.From != "a.test" {
		t.Fatalf("parsed results: %+v %+v %+v", results[0], results[1], results[2])
	}
}

func TestCheckForgedMessage(t *testing.T) {
	z := newZone(t,
		txt("a.test", "v=spf1 ip4:192.0.2.1 -all"),
		txt("_dmarc.a.test", "v=DMARC1; p=reject"),
		txt("_dmarc.c.test", "v=DMARC1; p=quarantine"),
	)
	c := checker(t, z.resolver(t), 0)
	// A second From domain with a weaker policy does not soften the verdict.
	msg := "From: ceo@c.test, Alice <alice@a.test>\r\nSubject: wire money\r\n\r\nnow\r\n"
	res := c.Check(context.Background(), Input{Raw: []byte(msg), RemoteIP: "127.0.0.1", Helo: "evil.example", MailFrom: "alice@a.test"})
	v, _ := res.DMARCVerdict()
	if res.SPF.Result != "fail" || res.DKIMSummary() != "none" || v.Result != "fail" || v.Disposition != PolicyReject || v.FromDomain != "a.test" {
		t.Fatalf("forged: spf %+v dkim %+v dmarc %+v", res.SPF, res.DKIM, res.DMARC)
	}
	if len(res.DMARC) != 2 || !strings.Contains(res.Header, "dmarc=fail (p=reject dis=reject") || !strings.Contains(res.Header, "dkim=none") {
		t.Fatalf("header:\n%s", res.Header)
	}
	// No From at all: DMARC has nothing to evaluate.
	res = c.Check(context.Background(), Input{Raw: []byte("Subject: x\r\n\r\nbody\r\n"), RemoteIP: "127.0.0.1", Helo: "h.test", MailFrom: "alice@a.test"})
	if _, ok := res.DMARCVerdict(); ok || !strings.Contains(res.Header, "dmarc=none") {
		t.Fatalf("no From: %+v\n%s", res.DMARC, res.Header)
	}
}

// A DNS server that never answers costs the message's deadline and no
// more, and every check says temperror.
func TestCheckDNSDeadline(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close() // a silent server: it reads nothing and answers nothing
	r, err := dnsresolver.New(dnsresolver.Config{Servers: []string{pc.LocalAddr().String()}, Timeout: time.Minute, Attempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := edKey(t)
	c := checker(t, r, 300*time.Millisecond)
	msg := sign(t, plainMsg, "a.test", "sel", key)
	start := time.Now()
	res := c.Check(context.Background(), Input{Raw: []byte(msg), RemoteIP: "192.0.2.1", Helo: "mx.a.test", MailFrom: "alice@a.test"})
	elapsed := time.Since(start)
	v, _ := res.DMARCVerdict()
	if res.SPF.Result != "temperror" || res.DKIMSummary() != "temperror" || v.Result != "temperror" || v.Disposition != PolicyNone {
		t.Fatalf("results: spf %+v dkim %+v dmarc %+v", res.SPF, res.DKIM, res.DMARC)
	}
	// Generous bound: the per-attempt timeout is a minute, so finishing
	// well under it shows the message deadline was what ended the wait.
	if elapsed > 20*time.Second {
		t.Fatalf("check took %v with a 300ms deadline", elapsed)
	}
}

func TestStripAuthResults(t *testing.T) {
	msg := "Received: by mx.b.test\r\n" +
		"Authentication-Results: mx.b.test; spf=pass smtp.mailfrom=x@evil.test\r\n" +
		"Authentication-Results: other.example;\r\n\tdkim=pass header.d=a.test\r\n" +
		"authentication-results: (forged) MX.B.TEST;\r\n\tdmarc=pass\r\n" +
		"Authentication-Results: \"mx.b.test\"; dkim=pass\r\n" +
		"Authentication-Results: mx.b.test.evil; dkim=pass\r\n" +
		"Subject: Authentication-Results: mx.b.test;\r\n" +
		"\r\n" +
		"Authentication-Results: mx.b.test; in the body stays\r\n"
	got := string(StripAuthResults([]byte(msg), "mx.b.test"))
	want := "Received: by mx.b.test\r\n" +
		"Authentication-Results: other.example;\r\n\tdkim=pass header.d=a.test\r\n" +
		"Authentication-Results: mx.b.test.evil; dkim=pass\r\n" +
		"Subject: Authentication-Results: mx.b.test;\r\n" +
		"\r\n" +
		"Authentication-Results: mx.b.test; in the body stays\r\n"
	if got != want {
		t.Fatalf("stripped:\n%s\nwant:\n%s", got, want)
	}
	clean := []byte("Subject: x\r\n\r\nbody\r\n")
	if out := StripAuthResults(clean, "mx.b.test"); &out[0] != &clean[0] {
		t.Error("a message without our fields was copied")
	}
}

// Values a sender controls cannot break out of the header.
func TestAuthResultsInjection(t *testing.T) {
	r := &Result{
		SPF:      SPFResult{Result: "fail", Identity: "mailfrom", Reason: "x)\r\nX-Evil: 1"},
		MailFrom: "a\"b\r\nX-Injected: yes@evil.test",
		DKIM:     []DKIMResult{{Result: "fail", Domain: "evil.test\r\nX-Spam-Status: No", Selector: "s;dmarc=pass", Reason: "(nested) \\"}},
		DMARC:    []DMARCResult{{Result: "fail", FromDomain: "a.test", Policy: "reject", Disposition: "reject"}},
	}
	h := formatAuthResults("mx.b.test", r)
	lines := strings.Split(strings.TrimSuffix(h, "\r\n"), "\r\n")
	for i, l := range lines[1:] {
		if !strings.HasPrefix(l, "\t") {
			t.Fatalf("line %d is not a continuation: %q\n%s", i+1, l, h)
		}
	}
	if strings.ContainsAny(strings.ReplaceAll(strings.TrimSuffix(h, "\r\n"), "\r\n\t", ""), "\r\n") {
		t.Fatalf("line break inside a value: %q", h)
	}
	_, results, err := authres.Parse(unfold([]byte(strings.TrimPrefix(strings.TrimSuffix(h, "\r\n"), "Authentication-Results:"))))
	if err != nil || len(results) != 3 {
		t.Fatalf("parse %q: %d results, %v", h, len(results), err)
	}
	if d := results[1].(*authres.DKIMResult); d.Value != "fail" {
		t.Fatalf("dkim result parsed as %+v", d)
	}
}

// The second message from the same sender is checked from the cache.
func TestCheckCachesAnswers(t *testing.T) {
	key, rec := edKey(t)
	z := newZone(t,
		txt("a.test", "v=spf1 ip4:127.0.0.0/8 -all"),
		txt("sel._domainkey.a.test", rec),
	)
	c := checker(t, z.resolver(t), 0)
	msg := []byte(sign(t, plainMsg, "a.test", "sel", key))
	in := Input{Raw: msg, RemoteIP: "127.0.0.1", Helo: "mx.a.test", MailFrom: "alice@a.test"}
	for i := range 3 {
		res := c.Check(context.Background(), in)
		if v, _ := res.DMARCVerdict(); res.SPF.Result != "pass" || res.DKIMSummary() != "pass" || v.Result != "none" {
			t.Fatalf("round %d: %+v", i, res)
		}
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"a.test", dns.TypeTXT}, {"sel._domainkey.a.test", dns.TypeTXT}, {"_dmarc.a.test", dns.TypeTXT}} {
		if n := z.count(q.name, q.qtype); n != 1 {
			t.Errorf("%s %s asked %d times in 3 checks, want 1", q.name, dns.TypeToString[q.qtype], n)
		}
	}
	hits, misses := c.cfg.Resolver.(*Cache).Stats()
	if hits != 6 || misses != 3 {
		t.Errorf("cache hits %d misses %d, want 6 and 3", hits, misses)
	}
}

// BenchmarkStripAuthResults: a message without our fields, the common
// case (go test ./internal/msgauth -run XXX -bench StripAuthResults).
func BenchmarkStripAuthResults(b *testing.B) {
	raw := []byte("Received: from a.test by mx.b.test; Tue, 3 Nov 2026 10:00:00 +0000\r\n" +
		"DKIM-Signature: v=1; a=rsa-sha256; d=a.test; s=x; h=from:to:subject;\r\n\tbh=abc; b=def\r\n" +
		"From: A <a@a.test>\r\nTo: b@b.test\r\nSubject: hello\r\nDate: Tue, 3 Nov 2026 10:00:00 +0000\r\n" +
		"Message-ID: <1@a.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n" +
		strings.Repeat("some body text of a message\r\n", 280))
	for b.Loop() {
		StripAuthResults(raw, "mx.b.test")
	}
}
