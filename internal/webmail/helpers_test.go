package webmail

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"pimail/internal/auth"
	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/password"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

const testPassword = "correct horse battery"

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type fixture struct {
	st   *sqlite.Store
	pipe *delivery.Pipeline
	srv  *Server
	ts   *httptest.Server
	ids  map[string]int64
}

var hashOnce string

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.AddDomain(ctx, "example.com"); err != nil {
		t.Fatal(err)
	}
	if hashOnce == "" {
		if hashOnce, err = password.Hash(testPassword); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{st: st, ids: map[string]int64{}}
	for _, a := range []string{"alice@example.com", "bob@example.com"} {
		acc, err := st.AddAccount(ctx, a, hashOnce)
		if err != nil {
			t.Fatalf("add account %s: %v", a, err)
		}
		f.ids[a] = acc.ID
	}
	dctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	dv := directory.New(st, quiet())
	if err := dv.Start(dctx); err != nil {
		t.Fatal(err)
	}
	f.pipe = delivery.New(st, dv, quiet())
	f.srv = New(Config{Hostname: "mail.example.com"}, st, auth.New(st, quiet()), f.pipe, quiet())
	f.ts = httptest.NewServer(f.srv)
	t.Cleanup(f.ts.Close)
	return f
}

// deliver puts raw into the recipients' inboxes through the pipeline.
func (f *fixture) deliver(t testing.TB, from string, to []string, raw string) {
	t.Helper()
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\n", "\r\n")
	if _, err := f.pipe.Deliver(context.Background(), delivery.Envelope{MailFrom: from, Recipients: to}, []byte(raw)); err != nil {
		t.Fatalf("deliver: %v", err)
	}
}

func (f *fixture) box(t testing.TB, user, name string) store.Mailbox {
	t.Helper()
	m, err := f.st.Mailbox(context.Background(), f.ids[user], name)
	if err != nil {
		t.Fatalf("mailbox %s %s: %v", user, name, err)
	}
	return m
}

func (f *fixture) metas(t testing.TB, user, name string) []store.MessageMeta {
	t.Helper()
	ms, err := f.st.Fetch(context.Background(), f.box(t, user, name).ID, nil, store.FetchOptions{Parsed: true})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// client is a browser stand-in: a cookie jar and the page's CSRF token.
type client struct {
	t    testing.TB
	f    *fixture
	http *http.Client
	csrf string
}

func (f *fixture) client(t testing.TB) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, f: f, http: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfRE = regexp.MustCompile(`name="csrf" (?:value|content)="([^"]+)"`)

func (c *client) do(req *http.Request) (*http.Response, string) {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := csrfRE.FindStringSubmatch(string(b)); m != nil {
		c.csrf = m[1]
	}
	return resp, string(b)
}

func (c *client) get(path string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.f.ts.URL+path, nil)
	return c.do(req)
}

// post sends a form; the page's CSRF token is added unless vals has one.
func (c *client) post(path string, vals url.Values) (*http.Response, string) {
	c.t.Helper()
	if vals == nil {
		vals = url.Values{}
	}
	if _, ok := vals["csrf"]; !ok {
		vals.Set("csrf", c.csrf)
	}
	req, _ := http.NewRequest("POST", c.f.ts.URL+path, strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

func (c *client) login(user string) {
	c.t.Helper()
	c.get("/login")
	resp, body := c.post("/login", url.Values{"username": {user}, "password": {testPassword}})
	if resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("login %s: status %d: %s", user, resp.StatusCode, body)
	}
	c.get("/") // picks up the session's CSRF token
	resp, body = c.get(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("home: %d %s", resp.StatusCode, body)
	}
	c.get(resp.Header.Get("Location"))
}

func (c *client) sessionCookie() string {
	u, _ := url.Parse(c.f.ts.URL)
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == "pimail" {
			return ck.Value
		}
	}
	return ""
}

func expectStatus(t testing.TB, resp *http.Response, want int, body string) {
	t.Helper()
	if resp.StatusCode != want {
		if len(body) > 600 {
			body = body[:600]
		}
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
}

const simpleMail = `From: Carol Sender <carol@example.net>
To: alice@example.com
Subject: Hello there
Message-ID: <m1@example.net>
Date: Mon, 2 Jan 2006 15:04:05 +0000

Hi Alice, see https://example.org/page. Bye.
`

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
