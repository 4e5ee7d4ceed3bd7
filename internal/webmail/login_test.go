package webmail

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestLoginRotatesSessionAndLogout(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	// A planted session cookie (fixation attempt) must not survive login.
	u, _ := url.Parse(f.ts.URL)
	c.http.Jar.SetCookies(u, []*http.Cookie{{Name: "pimail", Value: "attacker-chosen", Path: "/"}})
	c.login("alice@example.com")
	first := c.sessionCookie()
	if first == "" || first == "attacker-chosen" {
		t.Fatalf("session cookie after login = %q", first)
	}
	// A login that presents a live session cookie issues a new id and
	// kills the old one.
	c2 := f.client(t)
	c2.get("/login")
	c2.http.Jar.SetCookies(u, []*http.Cookie{{Name: "pimail", Value: first, Path: "/"}})
	resp, body := c2.post("/login", url.Values{"username": {"alice@example.com"}, "password": {testPassword}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	second := c2.sessionCookie()
	c = c2
	c.get("/box/1")
	if second == first {
		t.Fatal("session id not rotated at login")
	}
	if s, err := f.srv.sessions.Get(context.Background(), first, time.Now()); err != nil || s != nil {
		t.Fatal("old session still valid after re-login")
	}
	resp, _ = c.post("/logout", nil)
	expectStatus(t, resp, http.StatusSeeOther, "")
	if s, err := f.srv.sessions.Get(context.Background(), second, time.Now()); err != nil || s != nil {
		t.Fatal("session valid after logout")
	}
	resp, _ = c.get("/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("after logout: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestLoginFailuresAndRateLimit(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.get("/login")
	resp, body := c.post("/login", url.Values{"username": {"alice@example.com"}, "password": {"wrong"}})
	expectStatus(t, resp, http.StatusUnauthorized, body)
	if !strings.Contains(body, "Wrong address or password") {
		t.Fatalf("no error shown: %s", body)
	}
	var last *http.Response
	for i := 0; i < 20 && (last == nil || last.StatusCode != http.StatusTooManyRequests); i++ {
		last, _ = c.post("/login", url.Values{"username": {"alice@example.com"}, "password": {"wrong"}})
	}
	if last.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("no rate limit after repeated failures: %d", last.StatusCode)
	}
}

func TestLoginCSRF(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	// No login cookie: a cross-site forged login.
	resp, _ := c.post("/login", url.Values{"username": {"alice@example.com"}, "password": {testPassword}, "csrf": {"forged"}})
	expectStatus(t, resp, http.StatusForbidden, "")
	// Cookie present but field mismatched.
	c.get("/login")
	resp, _ = c.post("/login", url.Values{"username": {"alice@example.com"}, "password": {testPassword}, "csrf": {"forged"}})
	expectStatus(t, resp, http.StatusForbidden, "")
	if c.sessionCookie() != "" {
		t.Fatal("session created despite CSRF failure")
	}
}

func TestCookiesAndHeaders(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.SecureCookies = true
	c := f.client(t)
	resp, _ := c.get("/login")
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "img-src 'self' data:"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("nosniff missing")
	}
	sc := strings.Join(resp.Header.Values("Set-Cookie"), "\n")
	for _, want := range []string{"__Host-pimail-login=", "HttpOnly", "SameSite=Strict", "Secure", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %q", sc, want)
		}
	}
}

func TestCSRFRejected(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, simpleMail)
	c := f.client(t)
	c.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")
	vals := func(tok string) url.Values {
		return url.Values{"box": {itoa(inbox.ID)}, "uid": {"1"}, "op": {"flag"}, "csrf": {tok}}
	}
	for _, tok := range []string{"", "wrong-token"} {
		resp, _ := c.post("/act", vals(tok))
		expectStatus(t, resp, http.StatusForbidden, "")
	}
	// Right token but a cross-site Origin.
	req, _ := http.NewRequest("POST", f.ts.URL+"/act", strings.NewReader(vals(c.csrf).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, _ := c.do(req)
	expectStatus(t, resp, http.StatusForbidden, "")
	if m := f.metas(t, "alice@example.com", "INBOX"); m[0].Flags != 0 {
		t.Fatalf("flags changed by rejected requests: %v", m[0].Flags)
	}
	// The session's own token works.
	resp, _ = c.post("/act", vals(c.csrf))
	expectStatus(t, resp, http.StatusSeeOther, "")
	if m := f.metas(t, "alice@example.com", "INBOX"); m[0].Flags == 0 {
		t.Fatal("flag not set with valid token")
	}
}

func TestSessionExpiry(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	now := time.Now()
	f.srv.now = func() time.Time { return now.Add(f.srv.cfg.SessionTTL + time.Minute) }
	resp, _ := c.get("/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("expired session still accepted: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestAccountIsolation(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, simpleMail)
	inbox := f.box(t, "alice@example.com", "INBOX")
	c := f.client(t)
	c.login("bob@example.com")
	for _, p := range []string{"/box/" + itoa(inbox.ID), "/msg/" + itoa(inbox.ID) + "/1", "/msg/" + itoa(inbox.ID) + "/1/raw",
		"/msg/" + itoa(inbox.ID) + "/1/part/0", "/compose?mode=reply&box=" + itoa(inbox.ID) + "&uid=1"} {
		resp, body := c.get(p)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "Hello there") {
			t.Errorf("bob GET %s: %d", p, resp.StatusCode)
		}
	}
	resp, _ := c.post("/act", url.Values{"box": {itoa(inbox.ID)}, "uid": {"1"}, "op": {"delete"}})
	expectStatus(t, resp, http.StatusNotFound, "")
	if len(f.metas(t, "alice@example.com", "INBOX")) != 1 {
		t.Fatal("bob deleted alice's message")
	}
}
