package blackbox

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestAttackPlainHTTP (issue 28, item 7): the webmail and /admin/ took
// passwords over plain HTTP unless ACME was on. Now, with an HTTPS
// listener, the plain one only redirects to it (and still answers
// autoconfig), so no login form is served or taken in the clear. (Without
// HTTPS, logins over plain HTTP are taken only from loopback, which a
// test on loopback cannot show from outside: internal/server's
// TestRefusePlainLogins does.)
func TestAttackPlainHTTP(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	users := srv.AddAccounts("web")
	l := withListeners(t, "http", "https")
	srv.StartWith(l)
	plain := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	for _, path := range []string{"/login", "/admin/login", "/", "/box/1"} {
		resp, err := plain.Get("http://" + l.HTTP + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusPermanentRedirect || !strings.HasPrefix(loc, "https://") || !strings.HasSuffix(loc, path) {
			t.Errorf("GET http://…%s: %s, Location %q; want a redirect to HTTPS", path, resp.Status, loc)
		}
	}
	resp, err := plain.PostForm("http://"+l.HTTP+"/login", url.Values{"username": {users[0]}, "password": {testPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPermanentRedirect || len(resp.Cookies()) > 0 {
		t.Errorf("POST http://…/login: %s, cookies %v; want a redirect and no session", resp.Status, resp.Cookies())
	}
	// Autoconfig still answers on plain HTTP (mail clients look there).
	resp, err = plain.Get("http://" + l.HTTP + "/.well-known/autoconfig/mail/config-v1.1.xml?emailaddress=" + users[0])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("autoconfig over plain HTTP: %s", resp.Status)
	}
	// The login works over HTTPS.
	secure := clientFrom(0)
	secure.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // the self-signed certificate
	base := "https://" + l.HTTPS
	csrf := loginForm(t, secure, base)
	resp, err = secure.PostForm(base+"/login", url.Values{"username": {users[0]}, "password": {testPassword}, "csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.HasPrefix(resp.Request.URL.Path, "/login") {
		t.Errorf("login over HTTPS: %s at %s", resp.Status, resp.Request.URL.Path)
	}
}

// TestAttackSmallThings (issue 28, item 9): a webmail redirect taken off
// site by a tab (browsers drop tabs and newlines in URLs, so "/\t/x" is
// "//x"), and IMAP answering client mistakes with NO [SERVERBUG].
func TestAttackSmallThings(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	users := srv.AddAccounts("small")
	l := withListeners(t, "http")
	srv.StartWith(l)
	dialSMTP(t, srv.SMTP).send("sender@example.org", users, generatedMessage("small", 1, 500))

	t.Run("next", func(t *testing.T) {
		base := "http://" + l.HTTP
		c, inbox := webmailLogin(t, base, users[0])
		page, err := c.Get(base + inbox)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(page.Body)
		page.Body.Close()
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(body))
		if m == nil {
			t.Fatalf("no CSRF token on the inbox page")
		}
		box := strings.TrimPrefix(inbox, "/box/")
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		for _, next := range []string{"/\t/evil.example", "/\n/evil.example", "/\\evil.example", "//evil.example", " //evil.example"} {
			resp, err := c.PostForm(base+"/act", url.Values{"box": {box}, "op": {"read"}, "uid": {"1"}, "csrf": {m[1]}, "next": {next}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(resp.Header.Get("Location"))
			if strings.HasPrefix(strings.TrimSpace(loc), "//") || !strings.HasPrefix(loc, "/") {
				t.Errorf("next=%q: redirected to %q", next, resp.Header.Get("Location"))
			}
		}
	})

	t.Run("imap", func(t *testing.T) {
		ic := dialIMAP(t, srv.IMAP)
		ic.login(users[0])
		msg := "Subject: x\r\n\r\ny\r\n"
		st, _, err := ic.command("A1", fmt.Sprintf("APPEND \"/etc/passwd\" {%d+}\r\n%s", len(msg), msg))
		if err != nil || strings.Contains(st, "SERVERBUG") || !strings.HasPrefix(st, "NO") {
			t.Errorf("APPEND \"/etc/passwd\": %q %v, want NO without [SERVERBUG]", st, err)
		}
		ic.expectStatus("S1", "SELECT INBOX", "OK")
		ranges := strings.TrimSuffix(strings.Repeat("1:1,", 5000), ",")
		st, _, err = ic.command("F1", "UID FETCH "+ranges+" (FLAGS)")
		if err != nil || strings.Contains(st, "SERVERBUG") {
			t.Errorf("5,000 identical UID ranges: %q %v", st, err)
		}
		ic.expectStatus("N1", "NOOP", "OK")
	})
}
