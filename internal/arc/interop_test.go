package arc

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dkim"
)

// The interop tests sign and seal with pimail and verify with Debian's
// dkimpy (python3-dkim) and Mail::DKIM (libmail-dkim-perl), and the other
// way round. The keys are published by a DNS server on 127.0.0.1 that all
// three ask (pimail through its own client, dkimpy through dnspython,
// Mail::DKIM through Net::DNS). test/all.sh installs the packages.

const debianPython = "/usr/bin/python3" // Debian's, with python3-dkim

// dnsServer is an authoritative server on a loopback UDP port.
type dnsServer struct {
	addr string
	mu   sync.Mutex
	z    zone
}

func startDNS(t *testing.T) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dnsServer{addr: pc.LocalAddr().String(), z: zone{}}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.z.ServeDNS(w, r)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return d
}

func (d *dnsServer) addKey(t *testing.T, selector, domain string, pub any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.z.addKey(t, selector, domain, pub)
}

func (d *dnsServer) addRecord(t *testing.T, line string) {
	t.Helper()
	rr, err := dns.NewRR(line)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := strings.ToLower(rr.Header().Name)
	d.z[n] = append(d.z[n], rr)
}

func (d *dnsServer) hostPort() (string, string) {
	h, p, _ := net.SplitHostPort(d.addr)
	return h, p
}

// requireInterop skips (PIMAIL_TEST_SKIP_CLIENTS=1) or fails when the
// Debian packages are missing.
func requireInterop(t *testing.T) {
	t.Helper()
	err := exec.Command(debianPython, "-c", "import dkim, dns.resolver, nacl, authres").Run()
	if err == nil {
		err = exec.Command("perl", "-MMail::DKIM::Verifier", "-MMail::DKIM::ARC::Verifier", "-MNet::DNS", "-e", "1").Run()
	}
	if err == nil {
		return
	}
	if os.Getenv("PIMAIL_TEST_SKIP_CLIENTS") == "1" {
		t.Skipf("python3-dkim or libmail-dkim-perl missing (PIMAIL_TEST_SKIP_CLIENTS=1): %v", err)
	}
	t.Fatalf("python3-dkim, python3-nacl, python3-dnspython or libmail-dkim-perl missing (test/all.sh installs them): %v", err)
}

// pyPrelude gives dkimpy a dnsfunc that asks the test's DNS server.
const pyPrelude = `
import sys, json, base64, dkim, dns.resolver
req = json.load(sys.stdin)
res = dns.resolver.Resolver(configure=False)
res.nameservers = [req["dns_host"]]
res.port = int(req["dns_port"])
def dnsfunc(name, timeout=5):
    try:
        a = res.resolve(name.decode().rstrip("."), "TXT", lifetime=timeout)
    except Exception:
        return None
    for r in a:
        return b"".join(r.strings)
    return None
msg = base64.b64decode(req["msg"])
`

// python runs a dkimpy script over msg and returns what it prints.
func python(t *testing.T, d *dnsServer, script string, msg []byte, extra map[string]string) string {
	t.Helper()
	h, p := d.hostPort()
	in := map[string]string{"dns_host": h, "dns_port": p, "msg": base64.StdEncoding.EncodeToString(msg)}
	for k, v := range extra {
		in[k] = v
	}
	return run(t, exec.Command(debianPython, "-c", pyPrelude+script), in)
}

// perlPrelude points Mail::DKIM at the test's DNS server.
const perlPrelude = `
use strict; use warnings; use JSON::PP; use MIME::Base64; use Net::DNS; use Mail::DKIM;
my $req = decode_json(do { local $/; <STDIN> });
Mail::DKIM::DNS::resolver(Net::DNS::Resolver->new(nameservers => [$req->{dns_host}], port => $req->{dns_port}, udp_timeout => 5, retry => 1, recurse => 0));
my $msg = decode_base64($req->{msg});
`

func perl(t *testing.T, d *dnsServer, script string, msg []byte, extra map[string]string) string {
	t.Helper()
	h, p := d.hostPort()
	in := map[string]string{"dns_host": h, "dns_port": p, "msg": base64.StdEncoding.EncodeToString(msg)}
	for k, v := range extra {
		in[k] = v
	}
	return run(t, exec.Command("perl", "-e", perlPrelude+script), in)
}

func run(t *testing.T, cmd *exec.Cmd, in map[string]string) string {
	t.Helper()
	b, _ := json.Marshal(in)
	cmd.Stdin = bytes.NewReader(b)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", cmd.Path, err, out.String(), errb.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%s: no answer in 60 s", cmd.Path)
	}
	return strings.TrimSpace(out.String())
}

// Scripts: each prints one result word per signature, in header order.
const (
	pyDKIMVerify = `
d = dkim.DKIM(msg)
n = len([1 for k, v in dkim.rfc822_parse(msg)[0] if k.lower() == b"dkim-signature"])
print(" ".join("pass" if d.verify(idx=i, dnsfunc=dnsfunc) else "fail" for i in range(n)))
`
	pyDKIMSign = `
sig = dkim.sign(msg, req["selector"].encode(), req["domain"].encode(), req["key"].encode(),
    include_headers=[b"from", b"to", b"subject", b"date", b"message-id"],
    canonicalize=(req["hc"].encode(), req["bc"].encode()), signature_algorithm=req["alg"].encode())
sys.stdout.write(base64.b64encode(sig).decode())
`
	pyARCVerify = `
cv, results, comment = dkim.arc_verify(msg, dnsfunc=dnsfunc)
print(cv.decode(), comment)
`
	pyARCSign = `
out = dkim.ARC(msg).sign(req["selector"].encode(), req["domain"].encode(), req["key"].encode(),
    req["srvid"].encode(), include_headers=[b"from", b"to", b"subject", b"date", b"message-id"])
sys.stdout.write(base64.b64encode(b"".join(out)).decode())
`
	perlDKIMVerify = `
use Mail::DKIM::Verifier;
my $v = Mail::DKIM::Verifier->new(); $msg =~ s/\r?\n/\r\n/g; $v->PRINT($msg); $v->CLOSE;
print join(" ", map { my $r = $_->result; $r .= "(unsupported)" if $_->result_detail =~ /unsupported/i; $r } $v->signatures), "\n";
`
	perlDKIMSign = `
use Mail::DKIM::Signer; use Mail::DKIM::PrivateKey;
my $s = Mail::DKIM::Signer->new(Algorithm => "rsa-sha256", Method => $req->{method}, Domain => $req->{domain},
    Selector => $req->{selector}, Key => Mail::DKIM::PrivateKey->load(Data => $req->{key}),
    Headers => "from:to:subject:date:message-id");
$msg =~ s/\r?\n/\r\n/g; $s->PRINT($msg); $s->CLOSE;
print encode_base64($s->signature->as_string, "");
`
	perlARCVerify = `
use Mail::DKIM::ARC::Verifier;
my $v = Mail::DKIM::ARC::Verifier->new(); $msg =~ s/\r?\n/\r\n/g; $v->PRINT($msg); $v->CLOSE;
print $v->result, " ", ($v->result_detail // ""), "\n";
`
)

const interopMsg = "From: Alice Example <alice@pimail.test>\r\n" +
	"To: Bob <bob@elsewhere.test>, carol@elsewhere.test\r\n" +
	"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?= and a long subject that is folded\r\n over two lines\r\n" +
	"Date: Fri, 27 Nov 2026 10:00:00 +0000\r\n" +
	"Message-ID: <interop.1@pimail.test>\r\n" +
	"List-Id: <news.pimail.test>\r\n" +
	"List-Unsubscribe: <mailto:leave@pimail.test>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: 8bit\r\n" +
	"\r\n" +
	"Hello Bob,\r\n\r\n  trailing spaces   \r\n\ttabs\there\r\nGrüße.\r\n\r\n\r\n"

// interopMessages: a usual message, a header-only one (no empty line), and
// one with an empty body.
var interopMessages = map[string]string{
	"usual":       interopMsg,
	"header-only": "From: alice@pimail.test\r\nTo: bob@elsewhere.test\r\nSubject: no body\r\nDate: Fri, 27 Nov 2026 10:00:00 +0000\r\nMessage-ID: <interop.2@pimail.test>\r\n",
	"empty body":  "From: alice@pimail.test\r\nTo: bob@elsewhere.test\r\nSubject: empty\r\nDate: Fri, 27 Nov 2026 10:00:00 +0000\r\nMessage-ID: <interop.3@pimail.test>\r\n\r\n",
}

type interopKeys struct {
	rsa    *rsa.PrivateKey
	ed     ed25519.PrivateKey
	rsaPEM string // PKCS#1 PEM, for dkimpy and Mail::DKIM
	edSeed string // base64 seed, dkimpy's Ed25519 key format
}

func newInteropKeys(t *testing.T, d *dnsServer, domain string) interopKeys {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ek, _ := ed25519.GenerateKey(rand.Reader)
	d.addKey(t, "rsa", domain, &rk.PublicKey)
	d.addKey(t, "ed", domain, ek.Public())
	return interopKeys{
		rsa:    rk,
		ed:     ek,
		rsaPEM: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)})),
		edSeed: base64.StdEncoding.EncodeToString(ek.Seed()),
	}
}

// TestDKIMInterop: pimail's signatures (RSA and Ed25519, the signing
// policy with oversigning) verify in dkimpy and Mail::DKIM; dkimpy's
// (RSA and Ed25519, relaxed and simple) and Mail::DKIM's (RSA, relaxed
// and simple) verify in pimail; RFC 8463 Appendix A verifies in all three.
// Mail::DKIM 1.20230212 (Debian 12) knows no Ed25519: it must not call
// such a signature a pass.
func TestDKIMInterop(t *testing.T) {
	requireInterop(t)
	d := startDNS(t)
	keys := newInteropKeys(t, d, "pimail.test")
	r := d.z.resolver(t)
	ctx := context.Background()

	for name, msg := range interopMessages {
		signed := []byte(msg)
		for _, sel := range []struct {
			s   string
			key crypto.Signer
		}{{"ed", keys.ed}, {"rsa", keys.rsa}} {
			f, err := dkim.SignField(signed, dkim.SignOptions{Domain: "pimail.test", Selector: sel.s, Signer: sel.key,
				Headers: dkim.HeadersToSign(signed), Time: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			signed = append([]byte(f), signed...)
		}
		// Header order: RSA on top, then Ed25519.
		if got := python(t, d, pyDKIMVerify, signed, nil); got != "pass pass" {
			t.Errorf("%s: dkimpy on pimail's signatures: %q\n%s", name, got, signed)
		}
		got := perl(t, d, perlDKIMVerify, signed, nil)
		if got != "pass invalid(unsupported)" {
			t.Errorf("%s: Mail::DKIM on pimail's signatures: %q (want pass for RSA, unsupported for Ed25519)", name, got)
		}
	}

	for name, msg := range interopMessages {
		for _, c := range []struct{ alg, sel, key, hc, bc string }{
			{"rsa-sha256", "rsa", keys.rsaPEM, "relaxed", "relaxed"},
			{"rsa-sha256", "rsa", keys.rsaPEM, "simple", "simple"},
			{"ed25519-sha256", "ed", keys.edSeed, "relaxed", "relaxed"},
			{"ed25519-sha256", "ed", keys.edSeed, "simple", "simple"},
		} {
			out := python(t, d, pyDKIMSign, []byte(msg), map[string]string{"selector": c.sel, "domain": "pimail.test", "key": c.key, "hc": c.hc, "bc": c.bc, "alg": c.alg})
			sig, _ := base64.StdEncoding.DecodeString(out)
			vs := dkim.Verify(ctx, r, append(sig, msg...), 5, time.Now())
			if len(vs) != 1 || vs[0].Result != dkim.Pass {
				t.Errorf("%s: pimail on dkimpy's %s %s/%s: %+v\n%s", name, c.alg, c.hc, c.bc, vs, sig)
			}
		}
		for _, method := range []string{"relaxed", "simple"} {
			out := perl(t, d, perlDKIMSign, []byte(msg), map[string]string{"selector": "rsa", "domain": "pimail.test", "method": method,
				"key": base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(keys.rsa))})
			sig, _ := base64.StdEncoding.DecodeString(out)
			vs := dkim.Verify(ctx, r, append(append(sig, "\r\n"...), msg...), 5, time.Now())
			if len(vs) != 1 || vs[0].Result != dkim.Pass {
				t.Errorf("%s: pimail on Mail::DKIM's %s: %+v\n%s", name, method, vs, sig)
			}
		}
	}

	// RFC 8463 Appendix A in the other two.
	raw, err := os.ReadFile("../dkim/testdata/rfc8463-a3.eml")
	if err != nil {
		t.Fatal(err)
	}
	zf, _ := os.ReadFile("../dkim/testdata/rfc8463-a2.zone")
	for _, l := range strings.Split(string(zf), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			d.addRecord(t, l)
		}
	}
	if got := python(t, d, pyDKIMVerify, raw, nil); got != "pass pass" {
		t.Errorf("dkimpy on RFC 8463 A.3: %q", got)
	}
	if got := perl(t, d, perlDKIMVerify, raw, nil); got != "invalid(unsupported) pass" {
		t.Errorf("Mail::DKIM on RFC 8463 A.3 (Ed25519, RSA): %q", got)
	}
}

// TestARCInterop: a set sealed by pimail validates in dkimpy and
// Mail::DKIM; dkimpy seals a second set on top, which pimail validates;
// a body changed afterwards fails in all three.
func TestARCInterop(t *testing.T) {
	requireInterop(t)
	d := startDNS(t)
	keys := newInteropKeys(t, d, "fwd.test")
	list := newInteropKeys(t, d, "list.test")
	r := d.z.resolver(t)
	ctx := context.Background()

	one := seal(t, []byte(interopMsg), "fwd.test", keys.rsa, Result{Status: None})
	// seal() uses selector "arc"; publish the key under it too.
	d.addKey(t, "arc", "fwd.test", &keys.rsa.PublicKey)
	if got := python(t, d, pyARCVerify, one, nil); !strings.HasPrefix(got, "pass") {
		t.Fatalf("dkimpy on pimail's seal: %q\n%s", got, one)
	}
	if got := perl(t, d, perlARCVerify, one, nil); !strings.HasPrefix(got, "pass") {
		t.Fatalf("Mail::DKIM on pimail's seal: %q", got)
	}
	// dkimpy seals i=2 (it wants its own Authentication-Results on top).
	withAR := append([]byte("Authentication-Results: mx.list.test; arc=pass; spf=pass smtp.mailfrom=alice@pimail.test\r\n"), one...)
	out := python(t, d, pyARCSign, withAR, map[string]string{"selector": "rsa", "domain": "list.test", "key": list.rsaPEM, "srvid": "mx.list.test"})
	set2, _ := base64.StdEncoding.DecodeString(out)
	if !bytes.Contains(set2, []byte("i=2")) {
		t.Fatalf("dkimpy sealed no second set: %q", set2)
	}
	two := append(set2, withAR...)
	if res := Verify(ctx, r, two); res.Status != Pass || res.Instances != 2 {
		t.Fatalf("pimail on dkimpy's seal over pimail's: %+v\n%s", res, two)
	}
	// pimail seals i=3 over both; dkimpy and Mail::DKIM validate it.
	three := seal(t, two, "fwd.test", keys.rsa, Verify(ctx, r, two))
	if got := python(t, d, pyARCVerify, three, nil); !strings.HasPrefix(got, "pass") {
		t.Errorf("dkimpy on a three-set chain: %q", got)
	}
	if got := perl(t, d, perlARCVerify, three, nil); !strings.HasPrefix(got, "pass") {
		t.Errorf("Mail::DKIM on a three-set chain: %q", got)
	}
	bad := bytes.Replace(three, []byte("Hello Bob"), []byte("Hello Eve"), 1)
	if got := python(t, d, pyARCVerify, bad, nil); strings.HasPrefix(got, "pass") {
		t.Errorf("dkimpy passed a changed body: %q", got)
	}
	if got := perl(t, d, perlARCVerify, bad, nil); strings.HasPrefix(got, "pass") {
		t.Errorf("Mail::DKIM passed a changed body: %q", got)
	}
	if res := Verify(ctx, r, bad); res.Status != Fail {
		t.Errorf("pimail passed a changed body: %+v", res)
	}
}
