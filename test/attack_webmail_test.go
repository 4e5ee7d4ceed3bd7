package blackbox

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// hostileNames are attachment file names that try to escape the
// download directory or inject into the response header.
var hostileNames = []string{
	"../../../../etc/passwd",
	`..\..\..\Windows\win.ini`,
	"/etc/shadow",
	"C:\\autoexec.bat",
	"....//....//etc/hosts",
	"%2e%2e%2f%2e%2e%2fetc%2fpasswd",
	"evil\r\nSet-Cookie: pwned=1",
	"invoice\u202Efdp.exe",
	"..",
	".bashrc",
}

// webmailLogin logs in through the real login form (login-CSRF double
// submit) and returns a client holding the session cookie and the path
// the login landed on (the inbox, /box/ID).
func webmailLogin(t *testing.T, base, user string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatalf("GET /login: %v", err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on the login page:\n%s", clip(string(page), 2000))
	}
	resp, err = c.PostForm(base+"/login", url.Values{"username": {user}, "password": {testPassword}, "csrf": {string(m[1])}})
	if err != nil {
		t.Fatalf("POST /login: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.HasPrefix(resp.Request.URL.Path, "/login") {
		t.Fatalf("login: %s, ended at %s", resp.Status, resp.Request.URL)
	}
	return c, resp.Request.URL.Path
}

// attachmentMessage is a multipart message with one attachment per
// hostile name, each with the name in both Content-Disposition filename
// and Content-Type name.
func attachmentMessage() []byte {
	var b strings.Builder
	b.WriteString("From: attacker@example.org\r\nTo: victim@test.local\r\nSubject: your files\r\n")
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=XX\r\n\r\n")
	b.WriteString("--XX\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n")
	for i, n := range hostileNames {
		enc := mime.QEncoding.Encode("utf-8", n) // survives header syntax, decoded by the server
		fmt.Fprintf(&b, "--XX\r\nContent-Type: application/octet-stream; name=\"%s\"\r\n", enc)
		fmt.Fprintf(&b, "Content-Disposition: attachment; filename=\"%s\"\r\n\r\nattachment %d\r\n", enc, i)
	}
	b.WriteString("--XX--\r\n")
	return []byte(b.String())
}

// TestAttackWebmailDownload delivers attachments with path-traversal and
// header-injection names and downloads each through the webmail: the
// offered file name must carry no path, no leading dot and no line break;
// and URL paths that climb out of /static/ or a mailbox never return
// files from the server.
func TestAttackWebmailDownload(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "[spam]\nenabled = false\n[av]\nattachment_policy = false\n")
	users := srv.AddAccounts("webvictim", "webbob")
	user := users[0]
	l := withListeners(t, "http")
	srv.StartWith(l)
	s := dialSMTP(t, srv.SMTP)
	s.send("attacker@example.org", []string{user}, attachmentMessage())
	s.send("friend@example.org", []string{users[1]}, generatedMessage(bobSecret, 1, 500))
	base := "http://" + l.HTTP
	c, inbox := webmailLogin(t, base, user)
	box, ok := strings.CutPrefix(inbox, "/box/")
	if !ok {
		t.Fatalf("login landed on %s, not a mailbox", inbox)
	}

	found := 0
	for part := range 3 + len(hostileNames)*2 {
		resp, err := c.Get(fmt.Sprintf("%s/msg/%s/1/part/%d", base, box, part))
		if err != nil {
			t.Fatalf("download part %d: %v", part, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			continue
		}
		if resp.Header.Get("Set-Cookie") != "" || len(resp.Header.Values("Content-Disposition")) > 1 {
			t.Errorf("part %d: header injection: %v", part, resp.Header)
		}
		cd := resp.Header.Get("Content-Disposition")
		_, params, err := mime.ParseMediaType(cd)
		if err != nil {
			t.Errorf("part %d: unparsable Content-Disposition %q: %v", part, cd, err)
			continue
		}
		name := params["filename"]
		t.Logf("part %d (%q): offered as %q", part, strings.TrimSpace(string(body)), name)
		if !strings.HasPrefix(string(body), "attachment ") {
			continue
		}
		found++
		if strings.ContainsAny(name, "/\\\r\n\x00") || strings.HasPrefix(name, ".") || name == "" ||
			strings.Contains(name, "\u202E") {
			t.Errorf("part %d: unsafe download name %q (Content-Disposition %q)", part, name, cd)
		}
	}
	if found != len(hostileNames) {
		t.Errorf("downloaded %d of %d attachments", found, len(hostileNames))
	}

	// Another account's mailboxes by ID: every box ID a session can guess.
	for id := range 40 {
		for _, p := range []string{"/box/%d", "/msg/%d/1", "/msg/%d/1/raw", "/msg/%d/1/body", "/msg/%d/1/part/0"} {
			u := fmt.Sprintf(base+p, id)
			resp, err := c.Get(u)
			if err != nil {
				t.Fatalf("GET %s: %v", u, err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if strings.Contains(string(body), bobSecret) {
				t.Errorf("GET %s (%s) shows another account's mail", u, resp.Status)
			}
		}
	}

	for _, p := range []string{
		"/static/../../../../etc/passwd", "/static/..%2f..%2f..%2f..%2fetc%2fpasswd",
		"/static/%2e%2e/%2e%2e/pimail.db", "/msg/..%2f..%2fetc/1/raw", "/msg/" + box + "/1/part/..%2f..%2fpimail.db", "/msg/" + box + "/1/raw/../../../../etc/passwd",
		"/box/..%2f..%2f..%2fetc%2fpasswd", "/msg/%2fetc%2fpasswd/1/raw",
	} {
		resp, err := c.Get(base + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if strings.Contains(string(body), "root:x:0:0") || strings.Contains(string(body), "SQLite format 3") {
			t.Errorf("GET %s returned a server file (%s)", p, resp.Status)
		}
		t.Logf("GET %s -> %s", p, resp.Status)
	}
}
