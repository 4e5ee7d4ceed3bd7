package msgauth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

// BenchmarkCheck is the whole check of one signed 8 KB message as
// delivery runs it (SPF, DKIM, DMARC, the Authentication-Results field),
// with the DNS answers cached as in production after the first message
// of a sender:
//
//	go test ./internal/msgauth -run XXX -bench BenchmarkCheck
func BenchmarkCheck(b *testing.B) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	recs := map[string]string{
		"a.test.":                "v=spf1 ip4:192.0.2.0/24 include:_spf.a.test -all",
		"_spf.a.test.":           "v=spf1 ip4:198.51.100.0/24 -all",
		"sel._domainkey.a.test.": "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub),
		"_dmarc.a.test.":         "v=DMARC1; p=reject",
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		if v, ok := recs[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeTXT {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300}, Txt: []string{v}})
		} else if !ok {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	res, err := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: h}})
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Config{Resolver: res, AuthservID: "mx.b.test"})
	if err != nil {
		b.Fatal(err)
	}
	msg := "Received: from mx.a.test by mx.b.test; Tue, 3 Nov 2026 10:00:00 +0000\r\n" +
		"From: Alice <alice@a.test>\r\nTo: bob@b.test\r\nSubject: hello\r\nDate: Tue, 3 Nov 2026 10:00:00 +0000\r\n" +
		"Message-ID: <1@a.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n" +
		strings.Repeat("some body text of a message, about eight kilobytes\r\n", 160)
	var signed bytes.Buffer
	if err := dkim.Sign(&signed, strings.NewReader(msg), &dkim.SignOptions{Domain: "a.test", Selector: "sel", Signer: key,
		HeaderKeys: []string{"From", "To", "Subject", "Date", "Message-ID"}}); err != nil {
		b.Fatal(err)
	}
	raw := signed.Bytes()
	in := Input{Raw: raw, RemoteIP: "198.51.100.7", Helo: "mx.a.test", MailFrom: "alice@a.test"}
	if r := c.Check(context.Background(), in); r.SPF.Result != "pass" || r.DKIMSummary() != "pass" {
		b.Fatalf("setup: %+v", r)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		c.Check(context.Background(), in)
	}
}
