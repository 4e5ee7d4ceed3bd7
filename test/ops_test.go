package blackbox

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"pimail/internal/dnscheck/zonetest"
)

// TestQuickstartAndCheckDNS runs quickstart for a domain, serves the DNS
// records it printed from a loopback DNS server, and checks them with
// `pimail check dns`: all pass; without the DMARC record the check fails
// and says what is missing. The printed password logs in.
func TestQuickstartAndCheckDNS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data, cfg := filepath.Join(dir, "data"), filepath.Join(dir, "etc", "pimail.toml")
	const domain, host = "ops.example", "mx1.ops.example"
	out := string(runTool(t, 2*time.Minute, "", nil, pimailBin, "quickstart",
		"--data", data, "--config", cfg, "--hostname", host, "--ip", "127.0.0.1", "you@"+domain))

	for _, f := range []string{cfg, filepath.Join(dir, "etc", "pimail.service")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("quickstart did not write %s: %v\n%s", f, err, out)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(dir, "etc", "pimail.service"))
	for _, want := range []string{"User=pimail", "ExecStart=/usr/local/bin/pimail serve --config " + cfg,
		"NoNewPrivileges=true", "ProtectSystem=strict", "ReadWritePaths=" + data, "PrivateTmp=true",
		"AmbientCapabilities=CAP_NET_BIND_SERVICE", "Restart=on-failure"} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("systemd unit lacks %q:\n%s", want, unit)
		}
	}
	// The MTA-STS policy is published from the store; one that senders
	// could not read is refused, a good one replaces it.
	mtasts := func(args ...string) (string, error) {
		b, err := runToolErr(time.Minute, "", nil, pimailBin, append([]string{"domain", "mta-sts", "--data", data, domain}, args...)...)
		return string(b), err
	}
	if p, err := mtasts(); err != nil || !strings.Contains(p, "mode: testing\nmx: "+host+"\n") {
		t.Errorf("the policy quickstart published: %q, %v", p, err)
	}
	bad, good := filepath.Join(dir, "bad.txt"), filepath.Join(dir, "good.txt")
	os.WriteFile(bad, []byte("version: STSv1\nmode: enforce\nmax_age: 86400\n"), 0o600) // no mx
	os.WriteFile(good, []byte("version: STSv1\nmode: enforce\nmx: "+host+"\nmax_age: 86400\n"), 0o600)
	if res, err := mtasts(bad); err == nil || !strings.Contains(res, "without mx") {
		t.Errorf("a policy without mx was published: %s", res)
	}
	if res, err := mtasts(good); err != nil {
		t.Errorf("publishing a policy: %v\n%s", err, res)
	}
	if p, _ := mtasts(); !strings.Contains(p, "mode: enforce\n") {
		t.Errorf("the published policy: %q", p)
	}

	zone := between(t, out, "; ---- DNS records for "+domain, "; ---- end of DNS records ----")
	for _, want := range []string{
		domain + ". 3600 IN MX 10 " + host + ".",
		domain + `. 3600 IN TXT "v=spf1 mx -all"`,
		"_dmarc." + domain + `. 3600 IN TXT "v=DMARC1; p=quarantine; rua=mailto:postmaster@` + domain + `"`,
		"_smtp._tls." + domain + ". 3600 IN TXT",
		"_mta-sts." + domain + `. 3600 IN TXT "v=STSv1; id=`,
		"autoconfig." + domain + ". 3600 IN CNAME " + host + ".",
		"_submission._tcp." + domain + ". 3600 IN SRV 0 1 587 " + host + ".",
		"_pop3s._tcp." + domain + ". 3600 IN SRV 0 1 995 " + host + ".",
		"_sieve._tcp." + domain + ". 3600 IN SRV 0 1 4190 " + host + ".",
		"._domainkey." + domain + ". 3600 IN TXT",
	} {
		if !strings.Contains(zone, want) {
			t.Errorf("printed records lack %q:\n%s", want, zone)
		}
	}
	srv, err := zonetest.Start(zone)
	if err != nil {
		t.Fatalf("load the printed records: %v\n%s", err, zone)
	}
	t.Cleanup(srv.Close)
	// The reverse name is set by the address's provider, as printed.
	if !strings.Contains(out, "1.0.0.127.in-addr.arpa. PTR "+host+".") {
		t.Errorf("no PTR advice for 127.0.0.1 in:\n%s", out)
	}
	if err := srv.Add("1.0.0.127.in-addr.arpa. 3600 IN PTR " + host + "."); err != nil {
		t.Fatal(err)
	}

	check := func() (string, error) {
		b, err := runToolErr(time.Minute, "", nil, pimailBin, "check", "dns", "--config", cfg, "--dns", srv.Addr, domain)
		return string(b), err
	}
	res, err := check()
	if err != nil {
		t.Fatalf("check dns on the printed records failed: %v\n%s", err, res)
	}
	if !regexp.MustCompile(`all \d+ DNS checks for ops.example passed`).MatchString(res) {
		t.Errorf("check dns output:\n%s", res)
	}
	t.Logf("check dns:\n%s", res)

	if srv.Remove("_dmarc."+domain, "TXT") != 1 {
		t.Fatal("no DMARC record to remove")
	}
	res, err = check()
	if err == nil {
		t.Fatalf("check dns passed without the DMARC record:\n%s", res)
	}
	want := "MISSING DMARC _dmarc." + domain + ": want v=DMARC1; p=quarantine; rua=mailto:postmaster@" + domain
	if !strings.Contains(res, want) || !strings.Contains(res, "1 of ") {
		t.Errorf("check dns without DMARC: want a line %q and one failure:\n%s", want, res)
	}

	// The configuration serves, and the printed password logs in.
	pw := regexp.MustCompile(`password +(\S+)`).FindStringSubmatch(out)
	if pw == nil {
		t.Fatalf("no password in the quickstart output:\n%s", out)
	}
	s := &Server{t: t, Data: data, SMTP: freeAddr(t), IMAP: freeAddr(t), Config: cfg}
	t.Cleanup(s.cleanup)
	s.Start()
	c, err := imapclient.DialInsecure(s.IMAP, &imapclient.Options{Dialer: &net.Dialer{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login("you@"+domain, pw[1]).Wait(); err != nil {
		t.Errorf("login with the printed password: %v", err)
	}
}

// between returns the text from the line starting with begin to the line
// end, inclusive.
func between(t *testing.T, s, begin, end string) string {
	t.Helper()
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("no %q … %q block in:\n%s", begin, end, s)
	}
	return s[i : j+len(end)]
}

const (
	opsMessages = 500
	opsConns    = 10
	opsBackupAt = 150 // acknowledged messages before the backup starts
)

// TestBackupDuringDelivery takes a backup while 500 messages are being
// delivered over SMTP, restores it into a fresh directory and starts a
// server on it: every message acknowledged before the backup started is
// there, intact, and `pimail verify` passes on the live data, the backup
// and the restored copy.
func TestBackupDuringDelivery(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "[spam]\nenabled = false\n") // not about spam: every message to INBOX
	users := srv.AddAccounts("ops")
	srv.Start()

	want := make([][]byte, opsMessages)
	for i := range want {
		want[i] = generatedMessage("backup", i, 2000+23*i)
	}
	var (
		acked    [opsMessages]atomic.Bool
		nAcked   atomic.Int32
		startAt  = make(chan struct{})
		startOne sync.Once
		wg       sync.WaitGroup
	)
	for c := range opsConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := rawSMTP(srv.SMTP)
			if err != nil {
				t.Errorf("connect: %v", err)
				return
			}
			defer s.Close()
			for i := c; i < opsMessages; i += opsConns {
				if err := s.transaction("sender@example.org", users, want[i]); err != nil {
					t.Errorf("message %d: %v", i, err)
					return
				}
				acked[i].Store(true)
				if nAcked.Add(1) == opsBackupAt {
					startOne.Do(func() { close(startAt) })
				}
				if code, _, err := s.cmd("RSET"); err != nil || code != 250 {
					t.Errorf("RSET: %d %v", code, err)
					return
				}
			}
		}()
	}
	select {
	case <-startAt:
	case <-time.After(3 * time.Minute):
		t.Fatalf("only %d messages acknowledged after 3 minutes", nAcked.Load())
	}
	var before []int
	for i := range acked {
		if acked[i].Load() {
			before = append(before, i)
		}
	}
	ackedAtStart := nAcked.Load()
	backup := filepath.Join(t.TempDir(), "backup")
	out := srv.Admin("backup", backup)
	ackedAtEnd := nAcked.Load()
	wg.Wait()
	t.Logf("backup started after %d acknowledgements, ended after %d; %d in all:\n%s", ackedAtStart, ackedAtEnd, nAcked.Load(), out)
	if ackedAtEnd == ackedAtStart {
		t.Errorf("no message was acknowledged while the backup ran: the server stopped taking mail")
	}
	if nAcked.Load() != opsMessages {
		t.Fatalf("%d of %d messages acknowledged", nAcked.Load(), opsMessages)
	}

	verifyOK(t, srv.Data)
	verifyOK(t, backup)
	restored := filepath.Join(t.TempDir(), "restored")
	runTool(t, 2*time.Minute, "", nil, pimailBin, "restore", backup, restored)
	verifyOK(t, restored)
	if b, err := runToolErr(time.Minute, "", nil, pimailBin, "restore", backup, restored); err == nil {
		t.Errorf("restore into a non-empty directory succeeded:\n%s", b)
	}

	rs := &Server{t: t, Data: restored, SMTP: freeAddr(t), IMAP: freeAddr(t)}
	t.Cleanup(rs.cleanup)
	rs.Start()
	c := imapLogin(t, rs.IMAP, users[0], nil)
	got := fetchAll(t, c, "INBOX")
	seen := map[int]bool{}
	for name, msg := range got {
		subj := headerValue(msg, "Subject")
		n, err := strconv.Atoi(strings.TrimPrefix(subj, "backup "))
		if err != nil || n < 0 || n >= opsMessages || seen[n] {
			t.Errorf("%s: unexpected or repeated Subject %q", name, subj)
			continue
		}
		seen[n] = true
		if err := checkDelivered(msg, want[n], "\r\n"); err != nil {
			t.Errorf("restored message %d is damaged: %v", n, err)
		}
	}
	lost := 0
	for _, i := range before {
		if !seen[i] {
			lost++
			if lost <= 10 {
				t.Errorf("message %d was acknowledged before the backup started but is not in the restored INBOX", i)
			}
		}
	}
	t.Logf("restored INBOX holds %d messages; %d were acknowledged before the backup; %d of them lost", len(got), len(before), lost)
}

// verifyOK runs `pimail verify` on a directory and fails on damage.
func verifyOK(t *testing.T, dir string) {
	t.Helper()
	b, err := runToolErr(2*time.Minute, "", nil, pimailBin, "verify", "--data", dir)
	if err != nil {
		t.Fatalf("pimail verify --data %s: %v\n%s", dir, err, b)
	}
	if !strings.Contains(string(b), " 0 problems") {
		t.Errorf("pimail verify --data %s:\n%s", dir, b)
	}
	t.Logf("verify %s", strings.TrimSpace(lastLine(string(b))))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
