package blackbox

import (
	"crypto/tls"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"
	"github.com/miekg/dns"
	"github.com/xdg-go/scram"
)

// testDNS is an authoritative DNS server on 127.0.0.1 (UDP and TCP on one
// port) for the zones of a test: both pimail instances are configured to
// ask it (dns.servers) for MX, SPF, DKIM and DMARC records.
type testDNS struct {
	addr string
	mu   sync.Mutex
	rrs  map[string][]dns.RR // by lower-case FQDN
}

func startTestDNS(t *testing.T) *testDNS {
	t.Helper()
	z := &testDNS{rrs: map[string][]dns.RR{}}
	var pc net.PacketConn
	var ln net.Listener
	for range 20 { // the TCP twin of a free UDP port may be taken
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no free UDP+TCP port pair on loopback")
	}
	z.addr = pc.LocalAddr().String()
	udp := &dns.Server{PacketConn: pc, Handler: z}
	tcp := &dns.Server{Listener: ln, Handler: z}
	started := make(chan struct{}, 2)
	udp.NotifyStartedFunc = func() { started <- struct{}{} }
	tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	for range 2 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("test DNS server did not start")
		}
	}
	t.Cleanup(func() {
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
	})
	return z
}

// add puts zone-file lines (comments and blank lines allowed) into the zone.
func (z *testDNS) add(t *testing.T, lines string) {
	t.Helper()
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, line := range strings.Split(lines, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatalf("zone line %q: %v", line, err)
		}
		name := strings.ToLower(rr.Header().Name)
		z.rrs[name] = append(z.rrs[name], rr)
	}
}

func (z *testDNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) == 1 {
		q := r.Question[0]
		name := strings.ToLower(q.Name)
		z.mu.Lock()
		rrs, ok := z.rrs[name]
		for _, rr := range rrs {
			if rr.Header().Rrtype == q.Qtype {
				m.Answer = append(m.Answer, rr)
			}
		}
		z.mu.Unlock()
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
	}
	_ = w.WriteMsg(m)
}

// scramSHA256 is a go-sasl client for SCRAM-SHA-256 (RFC 7677) over
// xdg-go/scram.
type scramSHA256 struct{ conv *scram.ClientConversation }

func (s *scramSHA256) Start() (string, []byte, error) {
	first, err := s.conv.Step("")
	return "SCRAM-SHA-256", []byte(first), err
}

func (s *scramSHA256) Next(challenge []byte) ([]byte, error) {
	r, err := s.conv.Step(string(challenge))
	return []byte(r), err
}

// twoServersConfig is the configuration of one instance: TLS for
// submission, the test DNS, sender authentication on for mail from
// loopback (both instances are on 127.0.0.1), and optionally a transport
// sending b.test's mail to instance B's SMTP port.
func twoServersConfig(dnsAddr, transportB string) string {
	cfg := fmt.Sprintf(`[tls]
self_signed = true
[dns]
servers = [%q]
timeout = "2s"
[auth]
enabled = true
trust_loopback = false
[queue]
mta_sts = false
retry_initial = "1s"
`, dnsAddr)
	if transportB != "" {
		cfg += fmt.Sprintf("[queue.transports.\"b.test\"]\nhost = %q\n", transportB)
	}
	return cfg
}

// TestTwoServers runs two pimail instances, for a.test and b.test, with a
// DNS server publishing their MX, SPF, DKIM and DMARC (p=reject) records.
// A user of A submits with SCRAM-SHA-256 over STARTTLS to a user of B; B
// receives it with spf, dkim and dmarc all "pass" in its
// Authentication-Results, and A keeps the Sent copy. A message forged to
// B claiming to be from a.test, unsigned and from a sender domain whose
// SPF does not allow the client, is refused by DMARC with 550 5.7.1.
func TestTwoServers(t *testing.T) {
	t.Parallel()
	zone := startTestDNS(t)
	b := NewServer(t, twoServersConfig(zone.addr, ""))
	a := NewServer(t, twoServersConfig(zone.addr, b.SMTP))
	a.Admin("domain", "add", "a.test")
	b.Admin("domain", "add", "b.test")
	a.Admin("account", "add", "--password", testPassword, "alice@a.test")
	b.Admin("account", "add", "--password", testPassword, "bob@b.test")

	// The zone: MX and A for both, SPF allowing loopback, A's DKIM keys
	// as `pimail dkim` prints them, and DMARC p=reject. forged.a.test is
	// the envelope domain of the forgery: its SPF allows no one.
	zone.add(t, `
a.test. 300 IN MX 10 mx.a.test.
b.test. 300 IN MX 10 mx.b.test.
mx.a.test. 300 IN A 127.0.0.1
mx.b.test. 300 IN A 127.0.0.1
a.test. 300 IN TXT "v=spf1 ip4:127.0.0.0/8 -all"
b.test. 300 IN TXT "v=spf1 ip4:127.0.0.0/8 -all"
forged.a.test. 300 IN TXT "v=spf1 -all"
_dmarc.a.test. 300 IN TXT "v=DMARC1; p=reject"
_dmarc.b.test. 300 IN TXT "v=DMARC1; p=reject"
`)
	keys := a.Admin("dkim", "a.test")
	if n := strings.Count(keys, "._domainkey.a.test."); n < 1 {
		t.Fatalf("pimail dkim printed no key records:\n%s", keys)
	}
	zone.add(t, keys)

	sub := withListeners(t, "submission")
	b.StartWith(Listeners{})
	a.StartWith(sub)

	// Submission at A: STARTTLS (self-signed certificate), then
	// SCRAM-SHA-256.
	c, err := smtp.DialStartTLS(sub.Submission, &tls.Config{InsecureSkipVerify: true}) // the test's self-signed certificate
	if err != nil {
		t.Fatalf("submission STARTTLS: %v", err)
	}
	defer c.Close()
	sc, err := scram.SHA256.NewClient("alice@a.test", testPassword, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(&scramSHA256{conv: sc.NewConversation()}); err != nil {
		t.Fatalf("AUTH SCRAM-SHA-256: %v", err)
	}
	subject := fmt.Sprintf("two servers %d", time.Now().UnixNano())
	msg := "From: Alice <alice@a.test>\r\nTo: Bob <bob@b.test>\r\nSubject: " + subject + "\r\n\r\nHello Bob, from server A.\r\n"
	if err := c.SendMail("alice@a.test", []string{"bob@b.test"}, strings.NewReader(msg)); err != nil {
		t.Fatalf("submit: %v", err)
	}
	_ = c.Quit()

	// B receives it (A's queue sends it to B's SMTP port).
	bob := imapLogin(t, b.IMAP, "bob@b.test", &imapclient.Options{})
	got := waitMessage(t, bob, "INBOX", subject, 60*time.Second)
	if got == "" {
		if junk := findMessage(t, bob, "Junk", subject); junk != "" {
			t.Fatalf("the message was filed into B's Junk:\n%s", headerOf(junk))
		}
		t.Fatalf("message not delivered to bob@b.test within 60s\nA's log:\n%s\nB's log:\n%s", a.Logs(), b.Logs())
	}
	ar := authResults(headerOf(got), "test.local") // the instances' host name, their authserv-id
	if len(ar) != 1 {
		t.Fatalf("want one Authentication-Results field of B, got %d:\n%s", len(ar), headerOf(got))
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\bspf=pass\b[^;]*smtp\.mailfrom=alice@a\.test`),
		regexp.MustCompile(`\bdkim=pass\b[^;]*header\.d=a\.test`),
		regexp.MustCompile(`\bdmarc=pass\b[^;]*header\.from=a\.test`),
	} {
		if !want.MatchString(ar[0]) {
			t.Errorf("Authentication-Results lacks %s:\n%s", want, ar[0])
		}
	}
	if !strings.Contains(headerOf(got), "DKIM-Signature:") {
		t.Errorf("delivered message carries no DKIM-Signature:\n%s", headerOf(got))
	}

	// A keeps the Sent copy.
	alice := imapLogin(t, a.IMAP, "alice@a.test", &imapclient.Options{})
	if findMessage(t, alice, "Sent", subject) == "" {
		t.Errorf("no Sent copy at A")
	}

	// The forgery: straight to B's MX from 127.0.0.1, From: a.test,
	// no signature, envelope sender at forged.a.test (SPF -all).
	forged := "From: Alice <alice@a.test>\r\nTo: bob@b.test\r\nSubject: forged " + subject + "\r\n\r\nPlease wire the money.\r\n"
	s := dialSMTP(t, b.SMTP)
	s.expect("MAIL FROM:<ceo@forged.a.test>", 250)
	s.expect("RCPT TO:<bob@b.test>", 250)
	code, text, err := s.data([]byte(forged))
	if err != nil || code != 550 || !strings.Contains(text, "5.7.1") {
		t.Fatalf("forged message: want 550 5.7.1, got %d %q (%v)", code, text, err)
	}
	s.expect("QUIT", 221)
	if findMessage(t, bob, "INBOX", "forged "+subject) != "" || findMessage(t, bob, "Junk", "forged "+subject) != "" {
		t.Fatalf("the refused forgery was stored")
	}
}

// waitMessage polls mailbox until a message with subject appears or d
// passes; it returns the message or "".
func waitMessage(t *testing.T, c *imapclient.Client, mailbox, subject string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if m := findMessage(t, c, mailbox, subject); m != "" || time.Now().After(deadline) {
			return m
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// findMessage returns the first message in mailbox whose header has
// "Subject: subject", or "".
func findMessage(t *testing.T, c *imapclient.Client, mailbox, subject string) string {
	t.Helper()
	for _, raw := range fetchAll(t, c, mailbox) {
		if strings.Contains(headerOf(string(raw)), "\nSubject: "+subject+"\r\n") {
			return string(raw)
		}
	}
	return ""
}

// headerOf is the header of a message, with the CRLF that ends its last
// field.
func headerOf(msg string) string {
	if i := strings.Index(msg, "\r\n\r\n"); i >= 0 {
		return msg[:i+2]
	}
	return msg
}

// authResults returns the unfolded Authentication-Results fields of
// header whose authserv-id is id.
func authResults(header, id string) []string {
	var out []string
	unfolded := strings.NewReplacer("\r\n\t", " ", "\r\n ", " ").Replace(header)
	for _, line := range strings.Split(unfolded, "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(name, "Authentication-Results") {
			continue
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(value), ";"); strings.EqualFold(first, id) {
			out = append(out, value)
		}
	}
	return out
}
