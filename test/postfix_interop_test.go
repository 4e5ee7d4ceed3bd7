package blackbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"pimail/internal/metrics"
)

// postfixBin is Debian's postfix command (test/all.sh installs the
// package without configuring it).
const postfixBin = "/usr/sbin/postfix"

// pfDomain is the mail domain of the test's Postfix instance.
const pfDomain = "pf.test"

// postfixPeer is a Postfix instance of the test's own: configuration,
// queue, data and mailboxes in a temporary directory, smtpd on a free
// loopback port, no DNS, no chroot.
type postfixPeer struct {
	t    *testing.T
	dir  string // root of the instance
	conf string // config_directory
	SMTP string // smtpd host:port
}

// startPostfix configures and starts a Postfix for pfDomain whose virtual
// mailboxes are the given local parts (Maildirs under dir/mail), and which
// sends mail for each domain of relay to the host:port given
// (transport_maps). extraTransport lines are added to the transport map
// as they are. It is stopped (postfix stop, by its master PID file) when
// the test ends.
func startPostfix(t *testing.T, mailboxes []string, relay map[string]string, extraTransport ...string) *postfixPeer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the Postfix interop test runs Postfix's master, which needs root (CI runs as root)")
	}
	if _, err := os.Stat(postfixBin); err != nil {
		if os.Getenv("PIMAIL_TEST_SKIP_CLIENTS") == "1" {
			t.Skipf("%s not installed (PIMAIL_TEST_SKIP_CLIENTS=1)", postfixBin)
		}
		t.Fatalf("%s not installed: run test/all.sh, which installs postfix, or set PIMAIL_TEST_SKIP_CLIENTS=1", postfixBin)
	}
	pfUser, err := user.Lookup("postfix")
	if err != nil {
		t.Fatalf("the postfix package's user: %v", err)
	}
	var uid, gid int
	fmt.Sscan(pfUser.Uid, &uid)
	fmt.Sscan(pfUser.Gid, &gid)

	// Not t.TempDir: Postfix's daemons run as the postfix user and must
	// reach their queue through every directory of the path.
	base := os.TempDir()
	if !searchable(base) {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "pimail-postfix-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &postfixPeer{t: t, dir: dir, conf: filepath.Join(dir, "conf"), SMTP: freeAddr(t)}
	for _, d := range []string{"conf", "queue", "data", "mail"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"data", "mail"} {
		if err := os.Chown(filepath.Join(dir, d), uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	writeTestCert(t, filepath.Join(p.conf, "key.pem"), filepath.Join(p.conf, "cert.pem"), "mx."+pfDomain)

	var vmailbox, transport strings.Builder
	for _, m := range mailboxes {
		fmt.Fprintf(&vmailbox, "%s@%s %s/%s/\n", m, pfDomain, pfDomain, m) // trailing /: Maildir
	}
	var relayDomains []string
	for dom, addr := range relay {
		host, port, _ := net.SplitHostPort(addr)
		fmt.Fprintf(&transport, "%s smtp:[%s]:%s\n", dom, host, port)
		relayDomains = append(relayDomains, dom)
	}
	for _, l := range extraTransport {
		transport.WriteString(l + "\n")
	}
	mainCF := fmt.Sprintf(`# Written by pimail's test/postfix_interop_test.go.
compatibility_level = 3.6
queue_directory = %[1]s/queue
data_directory = %[1]s/data
mail_owner = postfix
setgid_group = postdrop
maillog_file = %[1]s/postfix.log
maillog_file_prefixes = %[1]s
syslog_name = postfix-pimail-test

myhostname = mx.%[2]s
mydomain = %[2]s
myorigin = %[2]s
mydestination =
mynetworks = 127.0.0.0/8
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
alias_maps =
alias_database =
local_recipient_maps =
biff = no
append_dot_mydomain = no
smtputf8_enable = no

# No DNS: the transport map names every destination by address.
smtpd_peername_lookup = no
smtp_dns_support_level = disabled
smtp_host_lookup = native

# TLS both ways: smtpd offers STARTTLS with the test's certificate; the
# smtp client uses it when offered (opportunistic, RFC 7435).
smtpd_tls_security_level = may
smtpd_tls_chain_files = %[3]s/key.pem, %[3]s/cert.pem
smtpd_tls_received_header = yes
smtp_tls_security_level = may
smtp_tls_loglevel = 1

virtual_mailbox_domains = %[2]s
virtual_mailbox_base = %[1]s/mail
virtual_mailbox_maps = texthash:%[3]s/vmailbox
virtual_uid_maps = static:%[4]d
virtual_gid_maps = static:%[5]d
virtual_minimum_uid = 1
smtpd_reject_unlisted_recipient = yes
unknown_virtual_mailbox_reject_code = 550

relay_domains = %[6]s
transport_maps = texthash:%[3]s/transport
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination

# Quick retries for a test.
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
delay_warning_time = 0
`, dir, pfDomain, p.conf, uid, gid, strings.Join(relayDomains, ", "))
	masterCF := fmt.Sprintf(`# Written by pimail's test/postfix_interop_test.go: one loopback smtpd, no chroot.
%s inet  n       -       n       -       -       smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`, p.SMTP)
	for name, body := range map[string]string{"main.cf": mainCF, "master.cf": masterCF,
		"vmailbox": vmailbox.String(), "transport": transport.String()} {
		if err := os.WriteFile(filepath.Join(p.conf, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Cleanup(p.stop)
	if out, err := runToolErr(time.Minute, "", nil, postfixBin, "-c", p.conf, "start"); err != nil {
		t.Fatalf("postfix -c %s start: %v\n%s\n%s", p.conf, err, out, p.log())
	}
	// The master listens as soon as it runs; wait for the banner.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.SMTP, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 512)
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "220 ") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("postfix smtpd on %s not answering after 30s:\n%s", p.SMTP, p.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return p
}

// stop stops the instance by its master PID (postfix stop reads it from
// queue/pid/master.pid) and removes its directory.
func (p *postfixPeer) stop() {
	if p.t.Failed() {
		p.t.Logf("postfix log (tail):\n%s", p.log())
	}
	pidFile := filepath.Join(p.dir, "queue", "pid", "master.pid")
	if b, err := os.ReadFile(pidFile); err == nil {
		pid := strings.TrimSpace(string(b))
		if out, err := runToolErr(time.Minute, "", nil, postfixBin, "-c", p.conf, "stop"); err != nil {
			p.t.Errorf("postfix stop (master pid %s): %v\n%s", pid, err, out)
		}
		// postfix stop returns before the master has gone; wait for it.
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat("/proc/" + pid); err != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	os.RemoveAll(p.dir)
}

// log is the tail of the instance's mail log.
func (p *postfixPeer) log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "postfix.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// waitMaildir waits until the Maildir of local@pfDomain holds a message
// containing want and returns it, or fails the test after d.
func (p *postfixPeer) waitMaildir(local, want string, d time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, sub := range []string{"new", "cur"} {
			files, _ := filepath.Glob(filepath.Join(p.dir, "mail", pfDomain, local, sub, "*"))
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), want) {
					return string(b)
				}
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no message with %q in %s@%s's Maildir after %v\npostfix log:\n%s", want, local, pfDomain, d, p.log())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// writeTestCert writes a self-signed ECDSA certificate for name and its
// key as PEM files.
func writeTestCert(t *testing.T, keyFile, certFile, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// postfixPimailConfig is pimail's configuration for the interop test:
// TLS (self-signed) for submission and STARTTLS on port 25, quick queue
// retries, and pf.test's mail sent to the Postfix port (a per-domain
// transport override: no DNS).
func postfixPimailConfig(postfixAddr string) string {
	return fmt.Sprintf(`[tls]
self_signed = true
[queue]
mta_sts = false
retry_initial = "1s"
[queue.transports.%q]
host = %q
`, pfDomain, postfixAddr)
}

// TestPostfixInterop exchanges mail with a real Postfix (Debian's package,
// an instance of the test's own on loopback), both ways:
//
//   - A: a pimail user submits (STARTTLS, AUTH PLAIN) to carol@pf.test;
//     pimail's queue delivers it to Postfix over STARTTLS, and it lands in
//     carol's Maildir with pimail's DKIM-Signature;
//   - B: a message given to Postfix's smtpd for bob@test.local is relayed
//     by Postfix's smtp client to pimail's port 25 (STARTTLS) and shows up
//     in bob's INBOX over IMAP;
//   - forwarding: an alias of pimail forwarding to carol@pf.test sends on
//     mail from dave@pf.test with an SRS envelope sender at test.local; a
//     forged SRS address is refused; bounces of forwarded mail, pimail's
//     own DSN and one made by Postfix, reach the SRS address and are sent
//     on to dave@pf.test, the original sender, with the null sender;
//   - /metrics counts the queue's deliveries, failures and notices.
func TestPostfixInterop(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "") // the config needs Postfix's port: written below
	pf := startPostfix(t, []string{"carol", "dave", "gone", "back"},
		map[string]string{testDomain: srv.SMTP},
		"gone@"+pfDomain+" error:5.1.1 mailbox gone (test)",
		"back@"+pfDomain+" smtp:"+bracketHost(srv.SMTP))
	srv.Config = filepath.Join(t.TempDir(), "pimail.toml")
	if err := os.WriteFile(srv.Config, []byte(postfixPimailConfig(pf.SMTP)), 0o600); err != nil {
		t.Fatal(err)
	}
	users := srv.AddAccounts("alice", "bob")
	srv.Admin("alias", "add", "fwd@"+testDomain, "carol@"+pfDomain)
	srv.Admin("alias", "add", "fwdgone@"+testDomain, "gone@"+pfDomain)
	srv.Admin("alias", "add", "fwdback@"+testDomain, "back@"+pfDomain)
	sub := withListeners(t, "submission", "http")
	srv.StartWith(sub)
	stamp := time.Now().UnixNano()

	t.Run("PimailToPostfix", func(t *testing.T) {
		c, err := smtp.DialStartTLS(sub.Submission, &tls.Config{InsecureSkipVerify: true}) // pimail's self-signed certificate
		if err != nil {
			t.Fatalf("submission STARTTLS: %v", err)
		}
		defer c.Close()
		if err := c.Auth(sasl.NewPlainClient("", users[0], testPassword)); err != nil {
			t.Fatalf("AUTH PLAIN: %v", err)
		}
		subject := fmt.Sprintf("to postfix %d", stamp)
		msg := fmt.Sprintf("From: Alice <%s>\r\nTo: carol@%s\r\nSubject: %s\r\nMessage-ID: <%d@test.local>\r\n\r\nHello Carol, from pimail.\r\n",
			users[0], pfDomain, subject, stamp)
		if err := c.SendMail(users[0], []string{"carol@" + pfDomain}, strings.NewReader(msg)); err != nil {
			t.Fatalf("submit: %v", err)
		}
		_ = c.Quit()

		got := pf.waitMaildir("carol", "Subject: "+subject, 60*time.Second)
		hdr := headerOf(strings.ReplaceAll(got, "\n", "\r\n"))
		if !regexp.MustCompile(`(?m)^DKIM-Signature:[^\r]*(\r\n[ \t][^\r]*)*\bd=test\.local\b`).MatchString(hdr) {
			t.Errorf("message at Postfix carries no DKIM-Signature of test.local:\n%s", hdr)
		}
		// Postfix's Received field says how pimail's queue came in:
		// ESMTPS is ESMTP over TLS (RFC 3848).
		if !regexp.MustCompile(`\r\n[ \t]+by mx\.pf\.test \(Postfix\) with ESMTPS id `).MatchString(hdr) {
			t.Errorf("Postfix did not receive over TLS (no ESMTPS in its Received field):\n%s", hdr)
		}
		if !strings.Contains(hdr, "Return-Path: <"+users[0]+">") {
			t.Errorf("Return-Path is not the submitter:\n%s", hdr)
		}
		alice := imapLogin(t, srv.IMAP, users[0], &imapclient.Options{})
		if findMessage(t, alice, "Sent", subject) == "" {
			t.Errorf("no Sent copy at pimail")
		}
	})

	t.Run("PostfixToPimail", func(t *testing.T) {
		subject := fmt.Sprintf("from postfix %d", stamp)
		s := dialSMTP(t, pf.SMTP)
		s.expect("EHLO client.example", 250)
		s.expect("MAIL FROM:<dave@"+pfDomain+">", 250)
		s.expect("RCPT TO:<"+users[1]+">", 250)
		code, text, err := s.data([]byte("From: Dave <dave@" + pfDomain + ">\r\nTo: " + users[1] + "\r\nSubject: " + subject + "\r\n\r\nHello Bob, through Postfix.\r\n"))
		if err != nil || code != 250 {
			t.Fatalf("Postfix refused the message: %d %q (%v)", code, text, err)
		}
		s.expect("QUIT", 221)

		bob := imapLogin(t, srv.IMAP, users[1], &imapclient.Options{})
		got := waitMessage(t, bob, "INBOX", subject, 60*time.Second)
		if got == "" {
			t.Fatalf("message relayed by Postfix not in bob's INBOX after 60s\npostfix log:\n%s\npimail log:\n%s", pf.log(), srv.Logs())
		}
		hdr := headerOf(got)
		// pimail's own Received field: from Postfix's host name, over TLS.
		if !regexp.MustCompile(`Received: from mx\.pf\.test \([^)]*127\.0\.0\.1[^)]*\)[^\r]*(\r\n[ \t][^\r]*)*by test\.local`).MatchString(hdr) {
			t.Errorf("no Received field of pimail for Postfix's connection:\n%s", hdr)
		}
		if !regexp.MustCompile(`(?s)by test\.local.{0,200}ESMTPS`).MatchString(strings.ReplaceAll(hdr, "\r\n", " ")) {
			t.Errorf("Postfix did not send over TLS (no ESMTPS in pimail's Received field):\n%s", hdr)
		}
		if !strings.Contains(hdr, "Return-Path: <dave@"+pfDomain+">") {
			t.Errorf("envelope sender lost:\n%s", hdr)
		}
	})

	t.Run("ForwardWithSRS", func(t *testing.T) {
		subject := fmt.Sprintf("forwarded %d", stamp)
		s := dialSMTP(t, srv.SMTP)
		s.expect("EHLO mx."+pfDomain, 250)
		s.expect("MAIL FROM:<dave@"+pfDomain+">", 250)
		s.expect("RCPT TO:<fwd@"+testDomain+">", 250)
		code, text, err := s.data([]byte("From: Dave <dave@" + pfDomain + ">\r\nTo: fwd@" + testDomain + "\r\nSubject: " + subject + "\r\n\r\nPlease pass this on.\r\n"))
		if err != nil || code != 250 {
			t.Fatalf("pimail refused mail to a forwarding alias: %d %q (%v)", code, text, err)
		}
		got := pf.waitMaildir("carol", "Subject: "+subject, 60*time.Second)
		rp := regexp.MustCompile(`(?m)^Return-Path: <(SRS0=[^>]+@test\.local)>`).FindStringSubmatch(got)
		if rp == nil {
			t.Fatalf("forwarded message has no SRS Return-Path at test.local:\n%s", got)
		}
		if !strings.HasSuffix(strings.ToLower(rp[1]), "=pf.test=dave@test.local") {
			t.Errorf("SRS address %q does not carry the original sender", rp[1])
		}
		if !strings.Contains(got, "Please pass this on.") {
			t.Errorf("body lost:\n%s", got)
		}

		// A forged SRS address is refused at RCPT.
		forged := regexp.MustCompile(`^SRS0=[^=]+=`).ReplaceAllString(rp[1], "SRS0=zzzzzz=")
		s.expect("MAIL FROM:<>", 250)
		s.expect("RCPT TO:<"+forged+">", 550)
		s.expect("QUIT", 221)

		// Bounces of forwarded mail go back to dave through the SRS
		// address, in two ways:
		//  - fwdgone: Postfix refuses gone@pf.test at RCPT (error
		//    transport), so pimail's queue makes the DSN, addressed to
		//    the SRS sender, which pimail sends on;
		//  - fwdback: Postfix accepts back@pf.test, then its smtp client
		//    is refused (it relays back@ to pimail, which is no relay), so
		//    Postfix's own DSN comes in to pimail's port 25 for the SRS
		//    address and is sent on.
		for _, c := range []struct{ alias, mta, diag string }{
			{"fwdgone", "test.local", "mailbox gone (test)"},
			{"fwdback", "mx.pf.test", "back@pf.test"},
		} {
			bsubject := fmt.Sprintf("%s bounces %d", c.alias, stamp)
			s = dialSMTP(t, srv.SMTP)
			s.expect("EHLO mx."+pfDomain, 250)
			s.expect("MAIL FROM:<dave@"+pfDomain+">", 250)
			s.expect("RCPT TO:<"+c.alias+"@"+testDomain+">", 250)
			code, text, err = s.data([]byte("From: Dave <dave@" + pfDomain + ">\r\nTo: " + c.alias + "@" + testDomain + "\r\nSubject: " + bsubject + "\r\n\r\nThis one bounces.\r\n"))
			if err != nil || code != 250 {
				t.Fatalf("pimail refused mail to a forwarding alias: %d %q (%v)", code, text, err)
			}
			s.expect("QUIT", 221)
			dsn := pf.waitMaildir("dave", bsubject, 90*time.Second)
			dsnHdr := headerOf(strings.ReplaceAll(dsn, "\n", "\r\n"))
			if !strings.HasPrefix(dsn, "Return-Path: <>\n") {
				t.Errorf("%s: the bounce reached dave without the null sender:\n%s", c.alias, dsnHdr)
			}
			if !strings.Contains(dsnHdr, "To: <SRS0=") && !strings.Contains(dsnHdr, "To: SRS0=") {
				t.Errorf("%s: the bounce was not addressed to the SRS sender:\n%s", c.alias, dsnHdr)
			}
			if !strings.Contains(dsn, "Reporting-MTA: dns; "+c.mta) || !strings.Contains(dsn, "Action: failed") ||
				!strings.Contains(dsn, c.diag) || !strings.Contains(dsn, "multipart/report") {
				t.Errorf("%s: dave's message is not the DSN of %s:\n%s", c.alias, c.mta, dsn)
			}
		}
	})

	// The queue's metrics count what went out above: delivered to
	// Postfix were carol's two messages, back@'s forward and the two
	// bounces sent on to dave; gone@ failed once, with one notice.
	t.Run("QueueMetrics", func(t *testing.T) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			samples := scrape(t, sub.HTTP)
			delivered := metrics.Sum(samples, "pimail_queue_attempts_total", map[string]string{"result": "delivered"})
			failed := metrics.Sum(samples, "pimail_queue_attempts_total", map[string]string{"result": "failed"})
			notices := metrics.Sum(samples, "pimail_queue_notices_total", map[string]string{"action": "failed"})
			queued := metrics.Sum(samples, "pimail_queue_messages", nil)
			if delivered == 5 && failed == 1 && notices == 1 && queued == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("queue metrics: delivered %v (want 5), failed %v (want 1), failure notices %v (want 1), queued %v (want 0)",
					delivered, failed, notices, queued)
			}
			time.Sleep(time.Second)
		}
	})
}

// bracketHost turns "127.0.0.1:25" into "[127.0.0.1]:25", Postfix's
// notation for an address without MX lookup.
func bracketHost(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return "[" + host + "]:" + port
}

// searchable reports whether every directory from / to dir lets others
// through (o+x), as Postfix's daemons, running as the postfix user, need.
func searchable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}
