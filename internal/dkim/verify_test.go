package dkim

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

// testZone serves TXT records to a real dnsresolver.Client through its
// in-process transport.
type testZone map[string][]dns.RR

func (z testZone) add(t *testing.T, line string) {
	t.Helper()
	rr, err := dns.NewRR(line)
	if err != nil {
		t.Fatalf("zone line %q: %v", line, err)
	}
	n := strings.ToLower(rr.Header().Name)
	z[n] = append(z[n], rr)
}

func (z testZone) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
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

func (z testZone) resolver(t *testing.T) *dnsresolver.Client {
	t.Helper()
	c, err := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: z}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readZone(t *testing.T, path string) testZone {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	z := testZone{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			z.add(t, l)
		}
	}
	return z
}

// TestRFC8463Example verifies both signatures of RFC 8463 Appendix A.3
// (Ed25519 and RSA, relaxed/relaxed) with the keys of A.2, and signs the
// message anew with A.1's Ed25519 key: the new signature verifies too.
func TestRFC8463Example(t *testing.T) {
	raw, err := os.ReadFile("testdata/rfc8463-a3.eml")
	if err != nil {
		t.Fatal(err)
	}
	r := readZone(t, "testdata/rfc8463-a2.zone").resolver(t)
	now := time.Unix(1528637909, 0)
	vs := Verify(context.Background(), r, raw, 5, now)
	if len(vs) != 2 {
		t.Fatalf("%d verifications, want 2", len(vs))
	}
	for i, want := range []string{"ed25519-sha256", "rsa-sha256"} {
		v := vs[i]
		if v.Result != Pass || v.Algorithm != want || v.Domain != "football.example.com" || v.Identifier != "@football.example.com" {
			t.Errorf("signature %d: %+v", i, v)
		}
	}
	// One changed character in the body breaks both.
	for _, v := range Verify(context.Background(), r, bytes.Replace(raw, []byte("hungry"), []byte("Hungry"), 1), 5, now) {
		if v.Result != Fail {
			t.Errorf("tampered body: %+v", v)
		}
	}

	seed, _ := os.ReadFile("testdata/rfc8463-a1-ed25519.seed")
	sb, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(seed)))
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(sb)
	unsigned := raw[bytes.Index(raw, []byte("From: ")):]
	f, err := SignField(unsigned, SignOptions{Domain: "football.example.com", Selector: "brisbane", Signer: key,
		Headers: []string{"from", "to", "subject", "date", "message-id", "from", "subject", "date"}, Time: now})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f, "bh=2jUSOH9NhtVGCQWNr9BrIAPreKQjO6Sn7XIkfJVOzv8=") {
		t.Errorf("body hash differs from RFC 8463's:\n%s", f)
	}
	vs = Verify(context.Background(), r, append([]byte(f), unsigned...), 5, now)
	if len(vs) != 1 || vs[0].Result != Pass {
		t.Fatalf("own Ed25519 signature with the RFC's key: %+v", vs)
	}
}

func verifyOneResult(t *testing.T, r *dnsresolver.Client, raw []byte) Verification {
	t.Helper()
	vs := Verify(context.Background(), r, raw, 5, time.Now())
	if len(vs) != 1 {
		t.Fatalf("%d verifications", len(vs))
	}
	return vs[0]
}

const plainMsg = "From: a@example.org\r\nTo: b@example.net\r\nSubject: hi\r\n\r\nbody line\r\n"

// TestBodyLength: l= that covers the whole body passes; l= that leaves
// content unsigned (added after signing) is "policy", not "fail" (RFC
// 6376 §8.2; issue 22: every l= signature was reported fail).
func TestBodyLength(t *testing.T) {
	k, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	z := testZone{}
	z.add(t, `sel._domainkey.example.org. 60 IN TXT "v=DKIM1; p=`+base64.StdEncoding.EncodeToString(der)+`"`)
	r := z.resolver(t)
	signed := signWithTags(t, k, plainMsg, "l=11")
	if v := verifyOneResult(t, r, signed); v.Result != Pass {
		t.Fatalf("l= over the whole body: %+v", v)
	}
	appended := append(append([]byte(nil), signed...), "PS: wire the money to ...\r\n"...)
	if v := verifyOneResult(t, r, appended); v.Result != Policy {
		t.Fatalf("l= with content appended: %+v, want policy", v)
	}
	if v := verifyOneResult(t, r, signWithTags(t, k, plainMsg, "l=99")); v.Result != Permerror {
		t.Fatalf("l= longer than the body: %+v", v)
	}
}

// signWithTags signs msg like SignField but with extra tags in the field
// (the signer never writes l=; verifiers must handle it).
func signWithTags(t *testing.T, k *rsa.PrivateKey, msg string, extra string) []byte {
	t.Helper()
	head := "DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.org; s=sel; " + extra +
		"; h=From:To:Subject; bh=" + bodyHashB64([]byte(msg), extra) + "; b="
	sum := headerHash([]byte(msg), []string{"From", "To", "Subject"}, head)
	sig, err := SignHash(k, sum)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(head + base64.StdEncoding.EncodeToString(sig) + "\r\n" + msg)
}

func bodyHashB64(msg []byte, extra string) string {
	limit := int64(-1)
	if strings.HasPrefix(extra, "l=") {
		var n int64
		for _, c := range extra[2:] {
			n = n*10 + int64(c-'0')
		}
		limit = n
	}
	c := NewBodyCache(msg)
	return base64.StdEncoding.EncodeToString(c.get(true, limit).sum)
}

func headerHash(msg []byte, h []string, head string) []byte {
	hh := sha256.New()
	for _, f := range pickFields(msg, h) {
		if f != nil {
			hh.Write(CanonHeader(f, true))
		}
	}
	c := CanonHeader([]byte(head), true)
	hh.Write(c[:len(c)-2])
	return hh.Sum(nil)
}

// TestStrictKey: a key with t=s accepts only i= at d= itself (RFC 6376
// §3.6.1; issue 22: t=s was not enforced).
func TestStrictKey(t *testing.T) {
	k, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	z := testZone{}
	z.add(t, `sel._domainkey.example.org. 60 IN TXT "v=DKIM1; t=s; p=`+base64.StdEncoding.EncodeToString(der)+`"`)
	r := z.resolver(t)
	if v := verifyOneResult(t, r, signWithTags(t, k, plainMsg, "i=user@example.org")); v.Result != Pass {
		t.Fatalf("t=s, i= at d=: %+v", v)
	}
	if v := verifyOneResult(t, r, signWithTags(t, k, plainMsg, "i=user@sub.example.org")); v.Result != Permerror {
		t.Fatalf("t=s, i= at a subdomain: %+v, want permerror", v)
	}
	if v := verifyOneResult(t, r, signWithTags(t, k, plainMsg, "i=user@example.com")); v.Result != Permerror {
		t.Fatalf("i= outside d=: %+v", v)
	}
}

// TestSignatureChecks covers the permanent errors of RFC 6376 §6.1.1 and
// RFC 8301.
func TestSignatureChecks(t *testing.T) {
	k, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	z := testZone{}
	z.add(t, `sel._domainkey.example.org. 60 IN TXT "v=DKIM1; p=`+base64.StdEncoding.EncodeToString(der)+`"`)
	z.add(t, `revoked._domainkey.example.org. 60 IN TXT "v=DKIM1; p="`)
	r := z.resolver(t)
	past := time.Now().Add(-time.Hour).Unix()
	for name, c := range map[string]struct {
		raw  []byte
		want string
	}{
		"expired":             {signWithTags(t, k, plainMsg, "x="+itoa(past)), Permerror},
		"x before t":          {signWithTags(t, k, plainMsg, "t="+itoa(past)+"; x="+itoa(past-10)), Permerror},
		"sha1":                {bytes.Replace(signWithTags(t, k, plainMsg, "t=1"), []byte("a=rsa-sha256"), []byte("a=rsa-sha1"), 1), Permerror},
		"revoked":             {bytes.Replace(signWithTags(t, k, plainMsg, "t=1"), []byte("s=sel"), []byte("s=revoked"), 1), Permerror},
		"no key":              {bytes.Replace(signWithTags(t, k, plainMsg, "t=1"), []byte("s=sel"), []byte("s=nokey"), 1), Permerror},
		"dup tag":             {signWithTags(t, k, plainMsg, "t=1; t=2"), Permerror},
		"from unsigned":       {bytes.Replace(signWithTags(t, k, plainMsg, "t=1"), []byte("h=From:To:Subject"), []byte("h=To:Subject"), 1), Permerror},
		"valid":               {signWithTags(t, k, plainMsg, "t=1"), Pass},
		"header-only message": {signWithTags(t, k, "From: a@example.org\r\nTo: b@example.net\r\nSubject: hi\r\n", "t=1"), Pass},
	} {
		if v := verifyOneResult(t, r, c.raw); v.Result != c.want {
			t.Errorf("%s: %+v, want %s", name, v, c.want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
