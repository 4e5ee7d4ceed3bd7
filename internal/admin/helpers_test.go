package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"pimail/internal/auth"
	"pimail/internal/password"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

const testPassword = "correct horse battery"

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var testHash string

// fixture is a real SQLite store with example.com, the administrator
// admin@example.com (the oldest account) and the ordinary user@example.com,
// and the admin handler on a loopback test server.
type fixture struct {
	st  *sqlite.Store
	srv *Server
	ts  *httptest.Server
	ids map[string]int64
}

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
	if testHash == "" {
		if testHash, err = password.Hash(testPassword); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{st: st, ids: map[string]int64{}}
	for _, a := range []string{"admin@example.com", "user@example.com"} {
		acct, err := st.AddAccount(ctx, a, testHash)
		if err != nil {
			t.Fatal(err)
		}
		f.ids[a] = acct.ID
	}
	f.srv = New(Config{Hostname: "mail.example.com"}, st, auth.New(st, quiet()), quiet())
	mux := http.NewServeMux()
	mux.Handle(Prefix, f.srv)
	f.ts = httptest.NewServer(mux)
	t.Cleanup(f.ts.Close)
	return f
}

func ctxT(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// client is a browser-like HTTP client with cookies that does not follow
// redirects, so tests see each answer.
type client struct {
	t    testing.TB
	base string
	c    *http.Client
}

func (f *fixture) client(t testing.TB) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: f.ts.URL, c: &http.Client{
		Jar:           jar,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (c *client) do(req *http.Request) (int, string, http.Header) {
	c.t.Helper()
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (c *client) get(path string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	code, body, _ := c.do(req)
	return code, body
}

func (c *client) post(path string, form url.Values) (int, string, http.Header) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the token from a page.
func (c *client) csrf(path string) string {
	c.t.Helper()
	code, body := c.get(path)
	m := csrfRE.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		c.t.Fatalf("GET %s: %d, no CSRF token", path, code)
	}
	return m[1]
}

// login logs in and returns the status of the answer to the form.
func (c *client) login(user, pw string) (int, string) {
	c.t.Helper()
	tok := c.csrf("/admin/login")
	code, body, _ := c.post("/admin/login", url.Values{"csrf": {tok}, "username": {user}, "password": {pw}})
	return code, body
}

// adminClient is a logged-in administrator.
func (f *fixture) adminClient(t testing.TB) *client {
	t.Helper()
	c := f.client(t)
	if code, body := c.login("admin@example.com", testPassword); code != http.StatusSeeOther {
		t.Fatalf("admin login = %d: %s", code, body)
	}
	return c
}

// action posts a form with the session's CSRF token (read from page) and
// returns the status of the POST and the page it leads to (following one
// redirect).
func (c *client) action(page, path string, form url.Values) (int, string) {
	c.t.Helper()
	form.Set("csrf", c.csrf(page))
	code, body, h := c.post(path, form)
	if code == http.StatusSeeOther {
		_, body = c.get(strings.TrimPrefix(h.Get("Location"), c.base))
	}
	return code, body
}

func mustContain(t testing.TB, body string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(body, p) {
			t.Fatalf("page lacks %q:\n%s", p, body)
		}
	}
}

func logEntries(t testing.TB, st store.Store, entries ...store.DeliveryLogEntry) {
	t.Helper()
	if err := st.LogDelivery(ctxT(t), entries); err != nil {
		t.Fatal(err)
	}
}
