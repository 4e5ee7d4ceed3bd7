package arc

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

// zone serves TXT records to a real dnsresolver.Client in-process.
type zone map[string][]dns.RR

func (z zone) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	q := r.Question[0]
	rrs, ok := z[strings.ToLower(q.Name)]
	if !ok {
		m.Rcode = dns.RcodeNameError
	}
	for _, rr := range rrs {
		if rr.Header().Rrtype == q.Qtype {
			m.Answer = append(m.Answer, rr)
		}
	}
	_ = w.WriteMsg(m)
}

func (z zone) addKey(t *testing.T, selector, domain string, pub any) {
	t.Helper()
	var rec string
	switch k := pub.(type) {
	case *rsa.PublicKey:
		der, _ := x509.MarshalPKIXPublicKey(k)
		rec = "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der)
	case ed25519.PublicKey:
		rec = "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(k)
	}
	var strs []string
	for len(rec) > 200 {
		strs = append(strs, `"`+rec[:200]+`"`)
		rec = rec[200:]
	}
	strs = append(strs, `"`+rec+`"`)
	rr, err := dns.NewRR(selector + "._domainkey." + domain + ". 60 IN TXT " + strings.Join(strs, " "))
	if err != nil {
		t.Fatal(err)
	}
	z[strings.ToLower(rr.Header().Name)] = append(z[strings.ToLower(rr.Header().Name)], rr)
}

func (z zone) resolver(t *testing.T) *dnsresolver.Client {
	t.Helper()
	c, err := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: z}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const testMsg = "From: Alice <alice@a.test>\r\nTo: list@fwd.test\r\nSubject: hello\r\nDate: Mon, 2 Jan 2006 15:04:05 +0000\r\nMessage-ID: <1@a.test>\r\n\r\nHello.\r\n"

func seal(t *testing.T, raw []byte, domain string, key *rsa.PrivateKey, chain Result) []byte {
	t.Helper()
	f, err := Seal(raw, SealOptions{Domain: domain, Selector: "arc", Signer: key,
		AuthResults: "mx." + domain + "; spf=pass smtp.mailfrom=alice@a.test; dkim=none; dmarc=pass header.from=a.test",
		Chain:       chain, Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(f), raw...)
}

// TestSealAndVerify: one forwarder seals (i=1, cv=none), a second seals
// after validating (i=2, cv=pass); the chain passes. A change to the body
// or to a signed field, a removed set, a forged cv and a seal by a key
// not published all fail.
func TestSealAndVerify(t *testing.T) {
	k1, _ := rsa.GenerateKey(rand.Reader, 2048)
	k2, _ := rsa.GenerateKey(rand.Reader, 2048)
	z := zone{}
	z.addKey(t, "arc", "fwd.test", &k1.PublicKey)
	z.addKey(t, "arc", "list.test", &k2.PublicKey)
	r := z.resolver(t)
	ctx := context.Background()

	if res := Verify(ctx, r, []byte(testMsg)); res.Status != None {
		t.Fatalf("no chain: %+v", res)
	}
	one := seal(t, []byte(testMsg), "fwd.test", k1, Result{Status: None})
	res := Verify(ctx, r, one)
	if res.Status != Pass || res.Instances != 1 || res.Domain != "fwd.test" {
		t.Fatalf("one set: %+v\n%s", res, one)
	}
	if !bytes.Contains(one, []byte("cv=none")) {
		t.Fatalf("first seal without cv=none:\n%s", one)
	}
	two := seal(t, one, "list.test", k2, res)
	res = Verify(ctx, r, two)
	if res.Status != Pass || res.Instances != 2 || res.Domain != "list.test" {
		t.Fatalf("two sets: %+v\n%s", res, two)
	}

	for name, bad := range map[string][]byte{
		"body changed":      bytes.Replace(two, []byte("Hello."), []byte("Pay now."), 1),
		"subject changed":   bytes.Replace(two, []byte("Subject: hello"), []byte("Subject: invoice"), 1),
		"older AAR changed": bytes.Replace(two, []byte("i=1; mx.fwd.test; spf=pass"), []byte("i=1; mx.fwd.test; spf=fail"), 1),
		"set 1 removed":     removeInstance(two, 1),
		"cv forged":         bytes.Replace(two, []byte("cv=pass"), []byte("cv=none"), 1),
		"duplicate seal":    append(bytes.SplitAfterN(two, []byte("\r\n"), 2)[0], two...),
	} {
		if res := Verify(ctx, r, bad); res.Status != Fail {
			t.Errorf("%s: %+v", name, res)
		}
	}
	k3, _ := rsa.GenerateKey(rand.Reader, 2048)
	if res := Verify(ctx, r, seal(t, []byte(testMsg), "fwd.test", k3, Result{Status: None})); res.Status != Fail {
		t.Errorf("seal by an unpublished key: %+v", res)
	}
	// A broken chain is sealed as failed, and stays failed.
	broken := bytes.Replace(two, []byte("Hello."), []byte("Pay now."), 1)
	bres := Verify(ctx, r, broken)
	three := seal(t, broken, "fwd.test", k1, bres)
	if !bytes.Contains(three, []byte("i=3; a=rsa-sha256")) || !bytes.Contains(three, []byte("cv=fail")) {
		t.Fatalf("sealing a failed chain:\n%s", three[:400])
	}
	if res := Verify(ctx, r, three); res.Status != Fail {
		t.Errorf("chain after cv=fail: %+v", res)
	}
}

// removeInstance drops the three fields of instance i.
func removeInstance(raw []byte, i int) []byte {
	var out []byte
	lines := bytes.SplitAfter(raw, []byte("\r\n"))
	skip := false
	for _, l := range lines {
		if len(l) > 0 && l[0] != ' ' && l[0] != '\t' {
			skip = bytes.HasPrefix(l, []byte("ARC-")) && bytes.Contains(l, []byte(": i="+string(rune('0'+i))+";"))
		}
		if !skip {
			out = append(out, l...)
		}
	}
	return out
}
