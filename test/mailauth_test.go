package blackbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"pimail/internal/arc"
	"pimail/internal/dkim"
	"pimail/internal/dnsresolver"
)

// mailAuthConfig: sender authentication on for mail from loopback, the
// test's DNS, and far.test's mail to a capturing MX.
func mailAuthConfig(dnsAddr, farMX string) string {
	return fmt.Sprintf(`[dns]
servers = [%q]
timeout = "2s"
[auth]
enabled = true
trust_loopback = false
[queue]
mta_sts = false
retry_initial = "1s"
[queue.transports."far.test"]
host = %q
`, dnsAddr, farMX)
}

// TestMailAuthentication sends issue 22's cases over SMTP to the built
// binary, with a DNS server on 127.0.0.1 publishing the senders' SPF,
// DKIM and DMARC records:
//   - every forged From of a p=reject domain is refused with 550 5.7.1:
//     1,000 filler fields before From, a comment inside the domain, four
//     From fields, four addresses, an internationalized domain, a DKIM
//     signature whose l= leaves an appended text unsigned;
//   - a forged From of a p=quarantine domain is filed into Junk;
//   - the records RFC 7489 §6.6.3 says give no policy (two records at the
//     From domain, an invalid p= at a subdomain, an invalid sp=) let the
//     message through, without falling back to the p=reject record of the
//     organizational domain;
//   - genuine mail passes: DKIM-signed, and SPF through an exists: macro
//     on a local part with an apostrophe (a DNS name with an escaped
//     octet);
//   - a message with more than 1,000 header fields is refused (554 5.6.0);
//   - every delivered message's Authentication-Results parses with
//     Python's authres and Perl's Mail::AuthenticationResults;
//   - mail forwarded by an alias to another domain, or redirected there
//     by a user's Sieve filter, arrives ARC-sealed, the chain valid for
//     pimail, dkimpy and Mail::DKIM, and the author's DKIM signature
//     still valid.
func TestMailAuthentication(t *testing.T) {
	py := requireTool(t, "/usr/bin/python3")
	requireTool(t, "perl")
	zone := startTestDNS(t)
	far := startCaptureMX(t)
	srv := NewServer(t, mailAuthConfig(zone.addr, far.addr))
	bob := srv.AddAccounts("bob")[0]
	srv.Admin("alias", "add", "fwd@"+testDomain, "someone@far.test")

	// The signer of the genuine mail, signed.test.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	rec := "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der)
	zone.add(t, `
victim.test. 300 IN TXT "v=spf1 ip4:192.0.2.1 -all"
_dmarc.victim.test. 300 IN TXT "v=DMARC1; p=reject"
_dmarc.quar.test. 300 IN TXT "v=DMARC1; p=quarantine"
_dmarc.xn--bcher-kva.example. 300 IN TXT "v=DMARC1; p=reject"
_dmarc.two.victim.test. 300 IN TXT "v=DMARC1; p=none"
_dmarc.two.victim.test. 300 IN TXT "v=DMARC1; p=quarantine"
_dmarc.badp.victim.test. 300 IN TXT "v=DMARC1; p=bogus"
_dmarc.badsp.test. 300 IN TXT "v=DMARC1; p=reject; sp=bogus"
evil.test. 300 IN TXT "v=spf1 +all"
signed.test. 300 IN TXT "v=spf1 -all"
_dmarc.signed.test. 300 IN TXT "v=DMARC1; p=reject"
obrien.test. 300 IN TXT "v=spf1 exists:%{l}._spf.obrien.test -all"
o\'brien._spf.obrien.test. 300 IN A 127.0.0.2
_dmarc.obrien.test. 300 IN TXT "v=DMARC1; p=reject"
`)
	zone.add(t, "sel._domainkey.signed.test. 300 IN TXT "+txtStrings(rec))
	keys := srv.Admin("dkim", testDomain) // the forwarder's ARC key
	zone.add(t, keys)
	l := withListeners(t, "managesieve")
	srv.StartWith(l)
	// Bob's filter redirects to far.test what asks for it.
	putSieve(t, l.ManageSieve, bob, `if header :contains "subject" "redirect-me" { redirect "someone@far.test"; }`)

	stamp := time.Now().UnixNano()
	msg := func(from, subject string, extra ...string) string {
		return strings.Join(extra, "") + "From: " + from + "\r\nTo: " + bob + "\r\nSubject: " + subject +
			"\r\nDate: " + time.Now().Format(time.RFC1123Z) + "\r\nMessage-ID: <" + subject + "@x.test>\r\n\r\nPlease wire the money.\r\n"
	}
	signed := func(m string) string {
		f, err := dkim.SignField([]byte(m), dkim.SignOptions{Domain: "signed.test", Selector: "sel", Signer: key,
			Headers: dkim.HeadersToSign([]byte(m)), Time: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return f + m
	}
	withL := func(m string) string {
		// A signature over the body as it is, with l= its length; then
		// text is appended below it.
		s := signed(m)
		body := s[strings.Index(s, "\r\n\r\n")+4:]
		return strings.Replace(s, "; h=", fmt.Sprintf("; l=%d; h=", len(body)), 1) + "Ignore the above: new bank details.\r\n"
	}
	filler := strings.Repeat("X-Filler: padding\r\n", 1000)
	type send struct {
		name, mailFrom, data string
		code                 int
		enhanced, mailbox    string // refusal: "5.7.1"; delivery: "INBOX"/"Junk"
	}
	cases := []send{
		{"filler fields", "x@evil.test", msg("CEO <ceo@victim.test>", fmt.Sprintf("filler-%d", stamp), filler), 550, "5.7.1", ""},
		{"comment in domain", "x@evil.test", msg("CEO <ceo@(x)victim.test>", fmt.Sprintf("comment-%d", stamp)), 550, "5.7.1", ""},
		{"four From fields", "x@evil.test", msg("a@evil.test", fmt.Sprintf("fields-%d", stamp), "From: b@evil.test\r\n", "From: c@evil.test\r\n", "From: ceo@victim.test\r\n"), 550, "5.7.1", ""},
		{"four addresses", "x@evil.test", msg("a@evil.test, b@d1.test, c@d2.test, CEO <ceo@victim.test>", fmt.Sprintf("addrs-%d", stamp)), 550, "5.7.1", ""},
		{"IDN domain", "x@evil.test", msg("CEO <ceo@bücher.example>", fmt.Sprintf("idn-%d", stamp)), 550, "5.7.1", ""},
		{"l= with appended text", "x@evil.test", withL(msg("CEO <ceo@signed.test>", fmt.Sprintf("ltag-%d", stamp))), 550, "5.7.1", ""},
		{"quarantine", "x@evil.test", msg("boss@quar.test", fmt.Sprintf("quar-%d", stamp)), 250, "", "Junk"},
		{"two records: no policy", "x@evil.test", msg("a@two.victim.test", fmt.Sprintf("two-%d", stamp)), 250, "", "INBOX"},
		{"invalid p at subdomain: no policy", "x@evil.test", msg("a@badp.victim.test", fmt.Sprintf("badp-%d", stamp)), 250, "", "INBOX"},
		{"invalid sp: no policy", "x@evil.test", msg("a@badsp.test", fmt.Sprintf("badsp-%d", stamp)), 250, "", "INBOX"},
		{"DKIM-signed", "x@evil.test", signed(msg("Alice <alice@signed.test>", fmt.Sprintf("signed-%d", stamp))), 250, "", "INBOX"},
		{"SPF with escaped name", "o'brien@obrien.test", msg("o'brien@obrien.test", fmt.Sprintf("obrien-%d", stamp)), 250, "", "INBOX"},
		{"too many fields", "x@evil.test", msg("a@evil.test", fmt.Sprintf("many-%d", stamp), strings.Repeat("X-Filler: padding\r\n", 1001)), 554, "5.6.0", ""},
	}
	for _, c := range cases {
		s := dialSMTP(t, srv.SMTP)
		s.expect("MAIL FROM:<"+c.mailFrom+">", 250)
		s.expect("RCPT TO:<"+bob+">", 250)
		code, text, err := s.data([]byte(c.data))
		if err != nil || code != c.code || (c.enhanced != "" && !strings.Contains(text, c.enhanced)) {
			t.Errorf("%s: got %d %q (%v), want %d %s", c.name, code, text, err, c.code, c.enhanced)
		}
		s.expect("QUIT", 221)
	}

	cl := imapLogin(t, srv.IMAP, bob, &imapclient.Options{})
	var delivered [][]byte
	for _, box := range []string{"INBOX", "Junk"} {
		for _, raw := range fetchAll(t, cl, box) {
			delivered = append(delivered, raw)
		}
	}
	for _, c := range cases {
		subject := "\nSubject: " + subjectOf(c.data) + "\r\n"
		found := ""
		for _, box := range []string{"INBOX", "Junk"} {
			for _, raw := range fetchAll(t, cl, box) {
				if strings.Contains(headerOf(string(raw)), subject) {
					found = box
				}
			}
		}
		if found != c.mailbox {
			t.Errorf("%s: found in %q, want %q", c.name, found, c.mailbox)
		}
	}
	for _, want := range []struct{ subject, result string }{
		{fmt.Sprintf("signed-%d", stamp), "dmarc=pass"},
		{fmt.Sprintf("obrien-%d", stamp), "spf=pass"},
		{fmt.Sprintf("two-%d", stamp), "dmarc=none"},
		{fmt.Sprintf("quar-%d", stamp), "dmarc=fail"},
	} {
		m := findMessage(t, cl, "INBOX", want.subject)
		if m == "" {
			m = findMessage(t, cl, "Junk", want.subject)
		}
		if ar := authResults(headerOf(m), "test.local"); len(ar) != 1 || !strings.Contains(ar[0], want.result) {
			t.Errorf("%s: Authentication-Results %q, want %s", want.subject, ar, want.result)
		}
	}
	if len(delivered) < 6 {
		t.Fatalf("%d messages delivered, want at least 6", len(delivered))
	}
	judge(t, py, zone.addr, "authres", delivered, func(tool string, i int, got string) {
		if got != "ok" {
			t.Errorf("%s on delivered message %d: %s", tool, i, got)
		}
	})

	// Forwarding: a DKIM-signed message to the alias reaches far.test
	// with an ARC set of test.local on top.
	fsubject := fmt.Sprintf("forwarded-%d", stamp)
	fwd := signed(strings.Replace(msg("Alice <alice@signed.test>", fsubject), "To: "+bob, "To: fwd@"+testDomain, 1))
	s := dialSMTP(t, srv.SMTP)
	if err := s.transaction("alice@signed.test", []string{"fwd@" + testDomain}, []byte(fwd)); err != nil {
		t.Fatalf("send to the alias: %v", err)
	}
	s.expect("QUIT", 221)
	got := []byte(far.wait(t, "Subject: "+fsubject, 30*time.Second).data)
	res, err := dnsresolver.New(dnsresolver.Config{Servers: []string{zone.addr}})
	if err != nil {
		t.Fatal(err)
	}
	sealed := func(what string, got []byte) {
		t.Helper()
		if !bytes.HasPrefix(got, []byte("ARC-Seal: i=1; a=rsa-sha256;")) || !bytes.Contains(got, []byte("cv=none")) ||
			!bytes.Contains(got, []byte("ARC-Authentication-Results: i=1; test.local;")) {
			t.Fatalf("%s without a first ARC set of test.local:\n%s", what, headerOf(string(got)))
		}
		if v := arc.Verify(context.Background(), res, got); v.Status != arc.Pass || v.Domain != testDomain {
			t.Errorf("pimail's own check of the chain of the %s: %+v", what, v)
		}
		judge(t, py, zone.addr, "arc", [][]byte{got}, func(tool string, _ int, out string) {
			if !strings.HasPrefix(out, "pass") {
				t.Errorf("%s: ARC chain of the %s: %s", tool, what, out)
			}
		})
		judge(t, py, zone.addr, "dkim", [][]byte{got}, func(tool string, _ int, out string) {
			if !strings.HasPrefix(out, "pass") {
				t.Errorf("%s: author's DKIM signature in the %s: %s", tool, what, out)
			}
		})
	}
	sealed("forwarded copy", got)

	// A Sieve redirect is sealed the same way, by the account's domain.
	rsubject := fmt.Sprintf("redirect-me-%d", stamp)
	s = dialSMTP(t, srv.SMTP)
	if err := s.transaction("alice@signed.test", []string{bob}, []byte(signed(msg("Alice <alice@signed.test>", rsubject)))); err != nil {
		t.Fatalf("send to bob: %v", err)
	}
	s.expect("QUIT", 221)
	sealed("redirected message", []byte(far.wait(t, "Subject: "+rsubject, 30*time.Second).data))

	// A header-only message from the local domain, forwarded: the queue
	// signs it (RSA and Ed25519) with test.local's keys, and dkimpy and
	// Mail::DKIM verify what pimail signed (Mail::DKIM 1.20230212 has no
	// Ed25519).
	hsubject := fmt.Sprintf("header-only-%d", stamp)
	s = dialSMTP(t, srv.SMTP)
	if err := s.transaction("alice@"+testDomain, []string{"fwd@" + testDomain},
		[]byte("From: Alice <alice@"+testDomain+">\r\nTo: fwd@"+testDomain+"\r\nSubject: "+hsubject+"\r\n")); err != nil {
		t.Fatalf("send a header-only message: %v", err)
	}
	s.expect("QUIT", 221)
	ho := []byte(far.wait(t, "Subject: "+hsubject, 30*time.Second).data)
	judge(t, py, zone.addr, "dkim", [][]byte{ho}, func(tool string, _ int, out string) {
		want := map[string]string{"mailauth.py": "pass pass", "mailauth.pl": "invalid(unsupported) pass"}[tool]
		words := strings.Fields(out)
		sort.Strings(words)
		if strings.Join(words, " ") != want {
			t.Errorf("%s: pimail's signatures of a header-only message: %q, want %q\n%s", tool, out, want, headerOf(string(ho)))
		}
	})
}

// judge runs test/py/mailauth.py (dkimpy, authres) and mailauth.pl
// (Mail::DKIM, Mail::AuthenticationResults) in mode over msgs and calls
// check with each line of each (tool is the script's name).
func judge(t *testing.T, py, dnsAddr, mode string, msgs [][]byte, check func(tool string, i int, out string)) {
	t.Helper()
	enc := make([]string, len(msgs))
	for i, m := range msgs {
		enc[i] = base64.StdEncoding.EncodeToString(m)
	}
	in, _ := json.Marshal(map[string]any{"mode": mode, "dns": dnsAddr, "msgs": enc})
	for _, cmd := range []*exec.Cmd{
		exec.Command(py, filepath.Join(repoRoot(), "test", "py", "mailauth.py")),
		exec.Command("perl", filepath.Join(repoRoot(), "test", "py", "mailauth.pl")),
	} {
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd.Args[1], err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(msgs) {
			t.Fatalf("%s %s: %d lines for %d messages:\n%s", filepath.Base(cmd.Args[1]), mode, len(lines), len(msgs), out)
		}
		for i, l := range lines {
			check(filepath.Base(cmd.Args[1]), i, l)
		}
	}
}

// subjectOf is the Subject value of a message written by the test.
func subjectOf(m string) string {
	i := strings.Index(m, "\r\nSubject: ")
	rest := m[i+len("\r\nSubject: "):]
	return rest[:strings.Index(rest, "\r\n")]
}

// txtStrings quotes a record as 255-octet character-strings.
func txtStrings(s string) string {
	var parts []string
	for len(s) > 200 {
		parts = append(parts, `"`+s[:200]+`"`)
		s = s[200:]
	}
	return strings.Join(append(parts, `"`+s+`"`), " ")
}
