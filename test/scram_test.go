package blackbox

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/xdg-go/scram"
)

// scramSASL is a go-sasl client over xdg-go/scram, for go-imap's
// Authenticate.
type scramSASL struct{ conv *scram.ClientConversation }

func (c *scramSASL) Start() (string, []byte, error) {
	first, err := c.conv.Step("")
	return "SCRAM-SHA-256", []byte(first), err
}

func (c *scramSASL) Next(challenge []byte) ([]byte, error) {
	if c.conv.Done() {
		return nil, nil
	}
	resp, err := c.conv.Step(string(challenge))
	return []byte(resp), err
}

// goIMAPSCRAM logs in with go-imap's client and SCRAM-SHA-256 and reports
// whether the server accepted it (and proved it knows the keys).
func goIMAPSCRAM(t *testing.T, addr, user, pass string) bool {
	t.Helper()
	c, err := imapclient.DialInsecure(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := scram.SHA256.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	s := &scramSASL{conv: cl.NewConversation()}
	if err := c.Authenticate(s); err != nil {
		return false
	}
	if !s.conv.Valid() {
		t.Errorf("go-imap: logged in as %s without a valid server signature", user)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Errorf("go-imap: SELECT after SCRAM: %v", err)
	}
	return true
}

// TestSCRAMIMAPPOP3 logs in to the real binary with SCRAM-SHA-256 from
// Python's imaplib (AUTHENTICATE) and poplib (AUTH), with the SCRAM
// steps written in Python (test/py/scramclient.py), and from go-imap's
// client: the keys made by `pimail account add` work, the server proves
// it knows them, and a wrong password, an unknown user and a disabled
// account are refused, each logged as a failed login in internal/auth's
// fail2ban format with the reason. Failed proofs count in the same
// limiter as failed passwords: after enough of them from one address, a
// correct LOGIN is refused too.
func TestSCRAMIMAPPOP3(t *testing.T) {
	t.Parallel()
	python := requireTool(t, "python3")
	srv := NewServer(t, "[login]\ndelay = \"10ms\"\nmax_delay = \"40ms\"\n")
	users := srv.AddAccounts("scram", "boss")
	user, boss := users[0], users[1]
	srv.Admin("account", "admin", boss)
	l := withListeners(t, "pop3", "http")
	srv.StartWith(l)
	script := filepath.Join(repoRoot(), "test", "py", "scramcheck.py")
	run := func(user, pass, want string) {
		t.Helper()
		out, err := runToolErr(2*time.Minute, t.TempDir(), nil, python, script, "--imap", srv.IMAP, "--pop3", l.POP3,
			"--user", user, "--password", pass, "--expect", want)
		if err != nil {
			t.Fatalf("scramcheck.py %s %s: %v\n%s", user, want, err, out)
		}
		t.Logf("scramcheck.py %s (%s):\n%s", user, want, out)
	}
	failed := func(user, reason string) []string {
		return srv.logLines(regexp.MustCompile(`level=WARN msg="authentication failed" remote=127\.0\.0\.1 user=` +
			regexp.QuoteMeta(user) + ` reason="` + reason + `" .*mech=SCRAM-SHA-256`))
	}

	run(user, testPassword, "ok")
	if l := srv.logLines(regexp.MustCompile(`msg="authentication failed"`)); len(l) != 0 {
		t.Errorf("failures logged for good logins: %q", l)
	}

	run(user, "wrong-password", "fail")
	if got := failed(user, "bad password"); len(got) != 2 {
		t.Errorf("wrong password: %d failure lines (IMAP and POP3 expected):\n%s", len(got), strings.Join(got, "\n"))
	}
	// fail2ban's filter (docs/admin.md) matches these lines.
	for _, line := range failed(user, "bad password") {
		if m := fail2banRegex.FindStringSubmatch(line); m == nil || m[1] != "127.0.0.1" {
			t.Errorf("fail2ban regex does not match %q", line)
		}
	}

	run("nobody@"+testDomain, testPassword, "fail")
	if got := failed("nobody@"+testDomain, "unknown account"); len(got) != 2 {
		t.Errorf("unknown user: %d failure lines:\n%s", len(got), strings.Join(got, "\n"))
	}

	if !goIMAPSCRAM(t, srv.IMAP, user, testPassword) {
		t.Error("go-imap: SCRAM login refused")
	}
	if goIMAPSCRAM(t, srv.IMAP, user, "wrong-password") {
		t.Error("go-imap: SCRAM login with a wrong password accepted")
	}

	adminDisable(t, "http://"+l.HTTP, boss, user)
	run(user, testPassword, "fail")
	if got := failed(user, "account disabled"); len(got) != 2 {
		t.Errorf("disabled account: %d failure lines:\n%s", len(got), strings.Join(got, "\n"))
	}

	// Failed proofs count like failed passwords: after the default 10
	// for one account from one address, that account is refused there.
	for i := 0; i < 10; i++ {
		goIMAPSCRAM(t, srv.IMAP, boss, "wrong-password")
	}
	limited := regexp.MustCompile(`msg="authentication failed" remote=127\.0\.0\.1 .*reason="rate limited"`)
	c, err := imapclient.DialInsecure(srv.IMAP, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(boss, testPassword).Wait(); err == nil {
		t.Error("LOGIN with the right password accepted after 10 failed SCRAM logins from the address")
	}
	// The owner, from another address, is not locked out by them.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 10 * time.Second}
	conn, err := d.Dial("tcp", srv.IMAP)
	if err != nil {
		t.Fatal(err)
	}
	other := imapclient.New(conn, nil)
	defer other.Close()
	if err := other.Login(boss, testPassword).Wait(); err != nil {
		t.Errorf("LOGIN from another address after the failures: %v", err)
	}
	if len(srv.logLines(limited)) == 0 {
		t.Errorf("no rate-limited line after failed SCRAM logins:\n%s", srv.Logs())
	}
}

// TestSCRAMAfterWebmailPasswordChange changes a password through the
// webmail's settings form and logs in over IMAP with SCRAM-SHA-256 (the
// keys beside the hash) and with LOGIN (the hash): both take the new
// password and refuse the old one. Before both went through one function
// (password.Set), the webmail changed only the hash, and SCRAM refused
// the new password.
func TestSCRAMAfterWebmailPasswordChange(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	user := srv.AddAccounts("scramweb")[0]
	l := withListeners(t, "http")
	srv.StartWith(l)
	base := "http://" + l.HTTP
	c, _ := webmailLogin(t, base, user)
	resp, err := c.Get(base + "/settings")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	m := regexp.MustCompile(`action="/settings/password".*?name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("GET /settings (%s): no password form:\n%s", resp.Status, clip(string(page), 2000))
	}
	const newPassword = "a new Passw0rd for SCRAM"
	resp, err = c.PostForm(base+"/settings/password", url.Values{
		"csrf": {string(m[1])}, "old": {testPassword}, "new": {newPassword}, "confirm": {newPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Request.URL.RawQuery, "notice=password") {
		t.Fatalf("password change: %s, ended at %s", resp.Status, resp.Request.URL)
	}

	if !goIMAPSCRAM(t, srv.IMAP, user, newPassword) {
		t.Error("SCRAM-SHA-256 login with the new password refused after the webmail change")
	}
	if goIMAPSCRAM(t, srv.IMAP, user, testPassword) {
		t.Error("SCRAM-SHA-256 login with the old password accepted after the webmail change")
	}
	login := func(pw string) error {
		c, err := imapclient.DialInsecure(srv.IMAP, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.Login(user, pw).Wait()
	}
	if err := login(newPassword); err != nil {
		t.Errorf("LOGIN with the new password: %v", err)
	}
	if login(testPassword) == nil {
		t.Error("LOGIN with the old password accepted")
	}
}
