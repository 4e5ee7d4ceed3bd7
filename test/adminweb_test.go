package blackbox

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
	"time"
)

// adminDisable disables account through the web admin, as an
// administrator would.
func adminDisable(t *testing.T, base, admin, account string) {
	t.Helper()
	a := adminLogin(t, base, admin)
	a.post("/admin/accounts", url.Values{"address": {account}, "action": {"disable"}, "csrf": {a.csrf("/admin/accounts")}})
}

// adminWeb is a session of the web admin.
type adminWeb struct {
	t    *testing.T
	base string
	c    *http.Client
}

// adminLogin logs in to the web admin (the login form with its CSRF
// double submit) as admin.
func adminLogin(t *testing.T, base, admin string) *adminWeb {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	a := &adminWeb{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	a.post("/admin/login", url.Values{"username": {admin}, "password": {testPassword}, "csrf": {a.csrf("/admin/login")}})
	return a
}

// page returns the page at path (200 OK).
func (a *adminWeb) page(path string) string {
	a.t.Helper()
	resp, err := a.c.Get(a.base + path)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("GET %s: %s\n%s", path, resp.Status, clip(string(page), 2000))
	}
	return string(page)
}

var adminCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the form at path.
func (a *adminWeb) csrf(path string) string {
	a.t.Helper()
	page := a.page(path)
	m := adminCSRF.FindStringSubmatch(page)
	if m == nil {
		a.t.Fatalf("GET %s: no CSRF field:\n%s", path, clip(page, 2000))
	}
	return m[1]
}

// post sends a form, which must answer 200 (after redirects).
func (a *adminWeb) post(path string, v url.Values) {
	a.t.Helper()
	resp, err := a.c.PostForm(a.base+path, v)
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("POST %s: %s\n%s", path, resp.Status, clip(string(page), 2000))
	}
}
