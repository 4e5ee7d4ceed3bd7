package delivery

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
	"pimail/internal/msgauth"
	"pimail/internal/spam"
)

// txtZone answers TXT queries from a map through the resolver's
// in-process transport; other names are NXDOMAIN.
type txtZone map[string][]string

func (z txtZone) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	q := r.Question[0]
	recs, ok := z[strings.TrimSuffix(strings.ToLower(q.Name), ".")]
	if !ok {
		m.Rcode = dns.RcodeNameError
	}
	for _, s := range recs {
		if q.Qtype == dns.TypeTXT {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{s}})
		}
	}
	_ = w.WriteMsg(m)
}

// authSetup is a fixture whose pipeline checks senders against a zone in
// which remote.test signs with key and allows 192.0.2.0/24 by SPF, and
// the DMARC policy of each domain is as given.
func authSetup(t *testing.T, policies map[string]string) (*fixture, ed25519.PrivateKey) {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	z := txtZone{
		"remote.test":                {"v=spf1 ip4:192.0.2.0/24 -all"},
		"sel._domainkey.remote.test": {"v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)},
		"quarantine.test":            {"v=spf1 -all"},
		"_dmarc.quarantine.test":     {"v=DMARC1; p=quarantine"},
	}
	for d, p := range policies {
		z["_dmarc."+d] = []string{"v=DMARC1; p=" + p}
	}
	res, err := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1:53"}, Transport: dnsresolver.HandlerTransport{Handler: z}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := msgauth.New(msgauth.Config{Resolver: res, AuthservID: "mail.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	f.pipe.WithAuth(Auth{Checker: c})
	return f, key
}

func dkimSign(t *testing.T, msg, domain string, key ed25519.PrivateKey) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := dkim.Sign(&out, strings.NewReader(msg), &dkim.SignOptions{Domain: domain, Selector: "sel", Signer: key}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// authMsg is a message from sender@remote.test carrying a forged verdict
// of this server, as a sender might try.
const authMsg = "Authentication-Results: mail.example.com; dkim=pass header.d=remote.test\r\n" +
	"From: Sender <sender@remote.test>\r\nTo: alice@example.com\r\nSubject: hello\r\n" +
	"Date: Mon, 2 Jan 2006 15:04:05 +0000\r\nMessage-ID: <a1@remote.test>\r\n\r\nHello.\r\n"

func TestAuthPassAddsResults(t *testing.T) {
	f, key := authSetup(t, map[string]string{"remote.test": "reject"})
	env := Envelope{MailFrom: "sender@remote.test", Recipients: []string{"alice@example.com"}, RemoteIP: "192.0.2.9", Helo: "mx.remote.test"}
	if _, err := f.pipe.Deliver(context.Background(), env, dkimSign(t, authMsg, "remote.test", key)); err != nil {
		t.Fatal(err)
	}
	raw, _, _ := f.mailbox(t, "alice@example.com", "INBOX")
	s := string(raw)
	if !strings.HasPrefix(s, "Return-Path: <sender@remote.test>\r\nAuthentication-Results: mail.example.com;\r\n\tspf=pass smtp.mailfrom=sender@remote.test;\r\n\tdkim=pass header.d=remote.test") ||
		!strings.Contains(s, "dmarc=pass (p=reject) header.from=remote.test\r\n") {
		t.Fatalf("stored header:\n%s", s)
	}
	// The forged field is gone: ours is the only one naming this server.
	if n := strings.Count(s, "Authentication-Results: mail.example.com;"); n != 1 {
		t.Fatalf("%d fields naming this server:\n%s", n, s)
	}
	// DKIM was verified on the message as sent, before the forged field
	// (which the sender signed) was removed: it still passes.
	if strings.Contains(s, "dkim=fail") {
		t.Fatalf("signature broken by the pipeline:\n%s", s)
	}
}

func TestAuthDMARCReject(t *testing.T) {
	f, _ := authSetup(t, map[string]string{"remote.test": "reject"})
	// From a client SPF does not allow, no signature: a forgery.
	env := Envelope{MailFrom: "sender@remote.test", Recipients: []string{"alice@example.com"}, RemoteIP: "203.0.113.5", Helo: "evil.test"}
	_, err := f.pipe.Deliver(context.Background(), env, []byte(authMsg))
	var re *RejectError
	if !errors.As(err, &re) || re.Code != 550 || re.Enhanced != [3]int{5, 7, 1} || strings.Contains(re.Message, "remote.test") {
		t.Fatalf("err = %v, want a 550 5.7.1 refusal", err)
	}
	if got := f.inbox(t, "alice@example.com"); len(got) != 0 {
		t.Fatalf("refused message stored: %d", len(got))
	}

	// The same message from an authenticated user is not checked.
	env.Authenticated = true
	if _, err := f.pipe.Deliver(context.Background(), env, []byte(authMsg)); err != nil {
		t.Fatalf("authenticated submission: %v", err)
	}
	raw, _, _ := f.mailbox(t, "alice@example.com", "INBOX")
	if strings.Contains(string(raw), "Authentication-Results") {
		t.Fatalf("authenticated mail has (forged or own) results:\n%s", raw)
	}

	// NoReject files it into Junk instead.
	f.pipe.auth.NoReject = true
	env.Authenticated = false
	if _, err := f.pipe.Deliver(context.Background(), env, []byte(authMsg)); err != nil {
		t.Fatalf("NoReject: %v", err)
	}
	if _, kw, _ := f.mailbox(t, "alice@example.com", "Junk"); !slices.Contains(kw, "$Junk") {
		t.Fatalf("keywords %v", kw)
	}
}

func TestAuthQuarantineAndLoopback(t *testing.T) {
	f, _ := authSetup(t, nil)
	msg := strings.ReplaceAll(authMsg, "remote.test", "quarantine.test")
	env := Envelope{MailFrom: "x@quarantine.test", Recipients: []string{"alice@example.com", "bob@example.com"}, RemoteIP: "127.0.0.1", Helo: "localhost"}
	if _, err := f.pipe.Deliver(context.Background(), env, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"alice@example.com", "bob@example.com"} {
		raw, kw, _ := f.mailbox(t, a, "Junk")
		if !slices.Contains(kw, "$Junk") || !strings.Contains(string(raw), "dmarc=fail (p=quarantine dis=quarantine") {
			t.Fatalf("%s: keywords %v\n%s", a, kw, raw)
		}
	}
	// With TrustLoopback, mail from loopback skips the checks.
	f.pipe.auth.TrustLoopback = true
	if _, err := f.pipe.Deliver(context.Background(), env, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	if got := f.inbox(t, "alice@example.com"); len(got) != 1 {
		t.Fatalf("loopback mail: %d in INBOX", len(got))
	}
}

// The spam rules see the authentication results.
func TestAuthFeedsSpamFilter(t *testing.T) {
	f, key := authSetup(t, map[string]string{"remote.test": "none"})
	f.pipe.WithFilters(Filters{Spam: trainedFilter(t, spam.Config{NoReject: true})})
	env := Envelope{MailFrom: "sender@remote.test", Recipients: []string{"alice@example.com"}, RemoteIP: "192.0.2.9", Helo: "mx.remote.test"}
	if _, err := f.pipe.Deliver(context.Background(), env, dkimSign(t, authMsg, "remote.test", key)); err != nil {
		t.Fatal(err)
	}
	// Where it is filed is the spam filter's business (its rules change);
	// what matters here is that it saw the results.
	mb := "INBOX"
	if len(f.inbox(t, "alice@example.com")) == 0 {
		mb = "Junk"
	}
	raw, _, _ := f.mailbox(t, "alice@example.com", mb)
	s := string(raw)
	if !strings.Contains(s, "DKIM_PASS") || !strings.Contains(s, "DMARC_PASS") {
		t.Fatalf("spam verdict does not weigh authentication:\n%s", s)
	}
	if i, j := strings.Index(s, "Authentication-Results:"), strings.Index(s, "X-Spam-"); i < 0 || j < i {
		t.Fatalf("field order:\n%s", s)
	}
}
