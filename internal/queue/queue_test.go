package queue

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	msgdkim "github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-smtp"

	"pimail/internal/dkim"
	"pimail/internal/dnsresolver"
	"pimail/internal/store"
)

// A server that answers 451 twice and then accepts: the message is
// retried, delivered once, DKIM-signed, and leaves the queue.
func TestRetryThenDeliver(t *testing.T) {
	mx := startMX(t, true)
	mx.rcptErr = func(n int, _ string) error {
		if n <= 2 {
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
		}
		return nil
	}
	cfg := testConfig()
	cfg.Transports["remote.example"] = Transport{Host: mx.addr}
	e := newEnv(t, cfg)
	id, err := e.q.Enqueue(context.Background(), e.ids["alice@example.org"], "alice@example.org", []string{"rcpt@remote.example"}, []byte(outMsg))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "delivery", func() bool { return len(mx.messages()) == 1 })
	waitFor(t, "queue entry removal", func() bool { return e.queueLen(t) == 0 })
	got := mx.messages()[0]
	if got.from != "alice@example.org" || len(got.rcpts) != 1 || got.rcpts[0] != "rcpt@remote.example" {
		t.Fatalf("envelope %+v", got)
	}
	if !got.tls {
		t.Error("STARTTLS offered but not used")
	}
	if !bytes.HasSuffix(got.data, []byte(outMsg)) {
		t.Fatalf("message changed in transit:\n%s", got.data)
	}
	// The signature verifies against the published keys.
	keys, _ := e.st.DKIMKeys(context.Background(), "example.org")
	recs := map[string]string{}
	for _, k := range keys {
		r, _ := dkim.PublicRecord(k)
		recs[r.Name] = r.Value
	}
	vs, err := msgdkim.VerifyWithOptions(bytes.NewReader(got.data), &msgdkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) {
			if v, ok := recs[name]; ok {
				return []string{v}, nil
			}
			return nil, fmt.Errorf("no record %s", name)
		},
	})
	if err != nil || len(vs) != 2 {
		t.Fatalf("DKIM verification: %d signatures, %v", len(vs), err)
	}
	for _, v := range vs {
		if v.Err != nil {
			t.Fatalf("DKIM signature does not verify: %v", v.Err)
		}
	}
	if n := mx.rcptN; n != 3 {
		t.Errorf("RCPT commands: %d, want 3 (two deferrals, one success)", n)
	}
	// No bounce for a delivered message.
	if in := e.inbox(t, "alice@example.org"); len(in) != 0 {
		t.Fatalf("sender got %d messages", len(in))
	}
	_ = id
}

// A 550 fails the recipient at once and the DSN reaches the sender's inbox;
// a message with the null sender is never bounced.
func TestPermanentFailureBounces(t *testing.T) {
	mx := startMX(t, false)
	mx.rcptErr = func(_ int, to string) error {
		if strings.HasPrefix(to, "gone@") {
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		}
		return nil
	}
	cfg := testConfig()
	cfg.Transports["remote.example"] = Transport{Host: mx.addr}
	e := newEnv(t, cfg)
	ctx := context.Background()
	if _, err := e.q.Enqueue(ctx, 1, "alice@example.org", []string{"gone@remote.example", "ok@remote.example"}, []byte(outMsg)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bounce", func() bool { return len(e.inbox(t, "alice@example.org")) == 1 })
	waitFor(t, "queue empty", func() bool { return e.queueLen(t) == 0 })
	if msgs := mx.messages(); len(msgs) != 1 || len(msgs[0].rcpts) != 1 || msgs[0].rcpts[0] != "ok@remote.example" {
		t.Fatalf("delivered: %+v", msgs)
	}
	dsn := string(e.inbox(t, "alice@example.org")[0])
	for _, want := range []string{
		"Return-Path: <>",
		"multipart/report; report-type=delivery-status",
		"Content-Type: message/delivery-status",
		"Reporting-MTA: dns; mail.example.org",
		"Final-Recipient: rfc822; gone@remote.example",
		"Action: failed",
		"Status: 5.1.1",
		"Diagnostic-Code: smtp; 550 5.1.1 no such user",
		"Content-Type: text/rfc822-headers",
		"Message-ID: <out1@example.org>",
		"Auto-Submitted: auto-replied",
	} {
		if !strings.Contains(dsn, want) {
			t.Errorf("DSN lacks %q:\n%s", want, dsn)
		}
	}
	if strings.Contains(dsn, "Final-Recipient: rfc822; ok@remote.example") {
		t.Error("DSN lists the delivered recipient")
	}

	// A bounce that bounces is dropped silently.
	before := len(e.inbox(t, "alice@example.org"))
	if _, err := e.q.Enqueue(ctx, 0, "", []string{"gone@remote.example"}, []byte(outMsg)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "null-sender entry done", func() bool { return e.queueLen(t) == 0 })
	time.Sleep(100 * time.Millisecond)
	if after := len(e.inbox(t, "alice@example.org")); after != before {
		t.Fatalf("a message with the null sender was bounced (%d → %d)", before, after)
	}
}

// The store is closed while the remote server holds the message in DATA
// (as in a crash); after reopening, the entry is delivered once its lease
// ends.
func TestSurvivesRestartMidDelivery(t *testing.T) {
	mx := startMX(t, false)
	release := make(chan struct{})
	mx.hangData = release
	cfg := testConfig()
	cfg.Lease = 300 * time.Millisecond
	cfg.Transports["remote.example"] = Transport{Host: mx.addr}
	e := newEnv(t, cfg)
	id, err := e.q.Enqueue(context.Background(), 1, "alice@example.org", []string{"rcpt@remote.example"}, []byte(outMsg))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first attempt to reach DATA", func() bool { return mx.connections() >= 1 && mx.rcptN >= 1 })
	time.Sleep(50 * time.Millisecond)
	// "Crash": the store goes away under the running delivery.
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	old := e.q
	e.cancel()

	mx.mu.Lock()
	mx.hangData = nil
	mx.mu.Unlock()
	close(release)
	old.Close()

	e.open(t)
	if en := e.entry(t, id); en.Recipients[0].State != store.QueuePending {
		t.Fatalf("entry after reopen: %+v", en)
	}
	waitFor(t, "delivery after restart", func() bool { return len(mx.messages()) == 1 })
	waitFor(t, "queue empty", func() bool { return e.queueLen(t) == 0 })
}

// MX resolution: the MX host's address is used, STARTTLS is opportunistic;
// a null MX fails at once (RFC 7505) and bounces.
func TestMXAndNullMX(t *testing.T) {
	mx := startMX(t, true)
	cfg := testConfig()
	cfg.SMTPPort = mx.port
	cfg.DisableMTASTS = true
	e := newEnv(t, cfg)
	e.dns.mx["plain.example"] = []dnsresolver.MXRecord{{Preference: 20, Host: "mx2.plain.example"}, {Preference: 10, Host: "mx1.plain.example"}}
	e.dns.a["mx1.plain.example"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	e.dns.a["mx2.plain.example"] = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	e.dns.mx["nomail.example"] = []dnsresolver.MXRecord{{Preference: 0, Host: ""}}
	ctx := context.Background()
	if _, err := e.q.Enqueue(ctx, 1, "alice@example.org", []string{"x@plain.example"}, []byte(outMsg)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "MX delivery", func() bool { return len(mx.messages()) == 1 })
	if !mx.messages()[0].tls {
		t.Error("opportunistic STARTTLS not used")
	}
	if _, err := e.q.Enqueue(ctx, 1, "alice@example.org", []string{"x@nomail.example"}, []byte(outMsg)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "null MX bounce", func() bool { return len(e.inbox(t, "alice@example.org")) == 1 })
	if dsn := string(e.inbox(t, "alice@example.org")[0]); !strings.Contains(dsn, "Status: 5.1.10") {
		t.Fatalf("null MX DSN:\n%s", dsn)
	}
	// Two messages to the same destination share one connection.
	before := mx.connections()
	for i := range 2 {
		if _, err := e.q.Enqueue(ctx, 1, "alice@example.org", []string{fmt.Sprintf("y%d@plain.example", i)}, []byte(outMsg)); err != nil {
			t.Fatal(err)
		}
		n := 2 + i
		waitFor(t, "delivery", func() bool { return len(mx.messages()) == n })
	}
	if c := mx.connections() - before; c != 0 {
		t.Errorf("%d new connections for messages to a pooled destination, want 0", c)
	}
}

// An MTA-STS policy in enforce mode that matches none of the MX hosts
// stops delivery (the message stays queued, no connection is made).
func TestMTASTSEnforceRefusesUnlistedMX(t *testing.T) {
	mx := startMX(t, true)
	hits := 0
	policy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.Host != "mta-sts.secure.example" || r.URL.Path != "/.well-known/mta-sts.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "version: STSv1\r\nmode: enforce\r\nmx: mx.secure.example\r\nmx: *.backup.example\r\nmax_age: 86400\r\n")
	}))
	defer policy.Close()
	client := policy.Client()
	tr := client.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, policy.Listener.Addr().String())
	}
	tr.TLSClientConfig.InsecureSkipVerify = true // the test certificate is for example.com

	cfg := testConfig()
	cfg.SMTPPort = mx.port
	cfg.HTTPClient = client
	e := newEnv(t, cfg)
	e.dns.mx["secure.example"] = []dnsresolver.MXRecord{{Preference: 10, Host: "mx.attacker.example"}}
	e.dns.a["mx.attacker.example"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	e.dns.txt["_mta-sts.secure.example"] = []string{"v=STSv1; id=20240101"}
	id, err := e.q.Enqueue(context.Background(), 1, "alice@example.org", []string{"x@secure.example"}, []byte(outMsg))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an attempt", func() bool { return e.entry(t, id).Attempts >= 1 })
	en := e.entry(t, id)
	if en.Recipients[0].State != store.QueuePending || !strings.Contains(en.Recipients[0].LastError, "MTA-STS") {
		t.Fatalf("entry after enforce refusal: %+v", en.Recipients[0])
	}
	if mx.connections() != 0 || len(mx.messages()) != 0 {
		t.Fatal("connected to an MX the policy does not list")
	}
	if hits == 0 {
		t.Fatal("policy never fetched")
	}
}

func TestPolicyMatching(t *testing.T) {
	p, err := parsePolicy("version: STSv1\nmode: enforce\nmx: mail.example.com\nmx: *.example.net\nmax_age: 604800\n")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"mail.example.com": true, "MAIL.example.com.": true, "a.example.net": true,
		"a.b.example.net": false, "example.net": false, "evil.com": false, "xmail.example.com": false,
	} {
		if got := p.matches(host); got != want {
			t.Errorf("matches(%q) = %v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{
		"version: STSv2\nmode: enforce\nmx: a\nmax_age: 1\n",
		"version: STSv1\nmode: enforce\nmax_age: 1\n",
		"version: STSv1\nmode: sometimes\nmx: a\nmax_age: 1\n",
		"version: STSv1\nmode: enforce\nmx: a\n",
	} {
		if _, err := parsePolicy(bad); err == nil {
			t.Errorf("policy accepted: %q", bad)
		}
	}
}

func TestBackoff(t *testing.T) {
	q := &Queue{cfg: Config{RetryInitial: time.Minute, RetryMax: 10 * time.Minute}}
	for n, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 4: 8 * time.Minute, 5: 10 * time.Minute, 40: 10 * time.Minute} {
		if got := q.backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// holdSaves is a store whose queue saves wait for gate.
type holdSaves struct {
	store.Store
	gate chan struct{}
}

func (h *holdSaves) UpdateQueueEntry(ctx context.Context, e store.QueueEntry) error {
	<-h.gate
	return h.Store.UpdateQueueEntry(ctx, e)
}

// A domain's slot goes to the next message only after the previous
// outcome is saved: a message the remote accepted but the store has not
// recorded is sent again after a crash, and holding the slot bounds those
// to queue.per_domain (docs/reliability.md). With per_domain 1 and the
// first save held up, the second message waits.
func TestDomainSlotHeldUntilSaved(t *testing.T) {
	mx := startMX(t, false)
	cfg := testConfig()
	cfg.PerDomain = 1
	cfg.Transports["remote.example"] = Transport{Host: mx.addr}
	e := newEnv(t, cfg)
	e.q.Close()
	gate := make(chan struct{})
	q, err := New(cfg, Deps{Store: &holdSaves{e.st, gate}, Dir: e.dir, Local: e.pipe, Resolver: e.dns, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	defer q.Close()
	defer close(gate)
	for _, rcpt := range []string{"one@remote.example", "two@remote.example"} {
		if _, err := q.Enqueue(context.Background(), e.ids["alice@example.org"], "alice@example.org", []string{rcpt}, []byte(outMsg)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the first delivery", func() bool { return len(mx.messages()) >= 1 })
	time.Sleep(500 * time.Millisecond)
	if n := len(mx.messages()); n != 1 {
		t.Fatalf("%d messages went out while the first one's outcome was not saved", n)
	}
}
