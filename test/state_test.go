package blackbox

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The state beside the mail (preferences, sessions, spam models, the SRS
// secret, MTA-STS policies) lives in the store: it survives restarts, and
// a data directory of a version that kept it in files is moved in at
// start.

// TestUpgradeLegacyDataDir starts the binary on a data directory written
// by pimail before the move (internal/upgrade/testdata, schema version
// 10, the state in files) and finds that state served: the MTA-STS policy
// over HTTP, the webmail preferences on the settings page, the spam
// models in `pimail spam check`.
func TestUpgradeLegacyDataDir(t *testing.T) {
	srv := &Server{t: t, Data: filepath.Join(t.TempDir(), "data"), SMTP: freeAddr(t), IMAP: freeAddr(t)}
	t.Cleanup(srv.cleanup)
	if err := os.MkdirAll(srv.Data, 0o700); err != nil {
		t.Fatal(err)
	}
	runTool(t, time.Minute, "", nil, "tar", "-xzf", filepath.Join(repoRoot(), "internal", "upgrade", "testdata", "datadir-v10.tar.gz"), "-C", srv.Data)
	l := withListeners(t, "http")
	srv.StartWith(l) // serve is the first command to open it
	if len(srv.logLines(regexp.MustCompile(`moved into the store`))) != 4 {
		t.Errorf("the log does not say that the four old kinds of files moved into the store")
	}
	req, _ := http.NewRequest("GET", "http://"+l.HTTP+"/.well-known/mta-sts.txt", nil)
	req.Host = "mta-sts.example.org"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(policy), "mx: mail.example.org\r\n") {
		t.Fatalf("MTA-STS policy after the upgrade: %s %q", resp.Status, policy)
	}
	for _, name := range []string{"spam", "webmail", "mta-sts", "srs.key"} {
		if _, err := os.Lstat(filepath.Join(srv.Data, name)); !os.IsNotExist(err) {
			t.Errorf("%s is still beside the database: %v", name, err)
		}
	}
	srv.Stop()

	srv.Admin("account", "passwd", "--password", testPassword, "alice@example.org")
	out := srv.Admin("spam", "check", "--account", "alice@example.org", writeTemp(t,
		"From: s1@sender.test\r\nSubject: offer\r\n\r\ncheap pills online pharmacy discount order now\r\n"))
	// The moved models give 0.84 (the classifier's indicator does not
	// saturate); the shipped base model alone, 0.71.
	if !regexp.MustCompile(`bayes probability (0\.[89]|1\.0)`).MatchString(out) {
		t.Errorf("spam check with the moved models:\n%s", out)
	}
	srv.StartWith(l)
	c, _ := webmailLogin(t, "http://"+l.HTTP, "alice@example.org")
	page := webGet(t, c, "http://"+l.HTTP+"/settings")
	for _, want := range []string{"Alice Example", "sent from pimail", "news@example.net"} {
		if !strings.Contains(page, want) {
			t.Errorf("settings page after the upgrade lacks %q", want)
		}
	}
}

// TestWebmailSessionSurvivesRestart: a browser logged in before a
// restart is still logged in after it, and a logout ends the session
// also for a server started later.
func TestWebmailSessionSurvivesRestart(t *testing.T) {
	srv := NewServer(t, "")
	user := srv.AddAccounts("keeper")[0]
	l := withListeners(t, "http")
	srv.StartWith(l)
	base := "http://" + l.HTTP
	c, inbox := webmailLogin(t, base, user)
	u, _ := url.Parse(base)
	var cookie *http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "pimail" {
			cookie = ck
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie after login")
	}
	page := webGet(t, c, base+inbox)
	csrf := regexp.MustCompile(`<meta name="csrf" content="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no CSRF token on the inbox page")
	}
	srv.Stop()
	srv.StartWith(l)
	// Still logged in, in the same session: the page with its CSRF token.
	if page := webGet(t, c, base+inbox); !strings.Contains(page, csrf[1]) {
		t.Fatal("after a restart the page has another session's CSRF token")
	}
	resp, err := c.PostForm(base+"/logout", url.Values{"csrf": {csrf[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.Path, "/login") {
		t.Fatalf("logout: %s, ended at %s", resp.Status, resp.Request.URL)
	}
	srv.Stop()
	srv.StartWith(l)
	// The old cookie, sent again by hand, opens nothing.
	req, _ := http.NewRequest("GET", base+inbox, nil)
	req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("a logged-out session after a restart: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
}

// writeTemp writes text to a new file and returns its path.
func writeTemp(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "msg.eml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
