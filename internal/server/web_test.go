package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"pimail/internal/store/sqlite"
)

func TestMTASTSPolicy(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: slog.New(slog.DiscardHandler), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, d := range []string{"example.org", "other.org"} {
		if _, err := st.AddDomain(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	policy := "version: STSv1\r\nmode: enforce\r\nmx: mail.example.org\r\nmax_age: 604800\r\n"
	if err := st.SetMTASTSPolicy(ctx, "example.org", policy); err != nil {
		t.Fatal(err)
	}
	h := mtaSTSPolicy(st, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		host string
		code int
	}{
		{"mta-sts.example.org", 200},
		{"MTA-STS.Example.Org:443", 200},
		{"example.org", 404},       // not the policy host
		{"mta-sts.other.org", 404}, // no policy for that domain
		{"mta-sts.unknown.org", 404},
		{"mta-sts.../secret", 404}, // no path tricks
		{"mta-sts.", 404},
	} {
		r := httptest.NewRequest("GET", "https://x/.well-known/mta-sts.txt", nil)
		r.Host = tc.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.code {
			t.Errorf("host %q: status %d, want %d", tc.host, w.Code, tc.code)
		}
		if tc.code == 200 && (w.Body.String() != policy || w.Header().Get("Content-Type") != "text/plain") {
			t.Errorf("host %q: body %q, type %q", tc.host, w.Body.String(), w.Header().Get("Content-Type"))
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	h := loopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for addr, code := range map[string]int{"127.0.0.1:5555": 204, "[::1]:5555": 204, "192.0.2.7:5555": 404, "garbage": 404} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != code {
			t.Errorf("%s: status %d, want %d", addr, w.Code, code)
		}
	}
}

func TestPort(t *testing.T) {
	for addr, want := range map[string]int{":993": 993, "127.0.0.1:1143": 1143, "": 0, "nonsense": 0} {
		if got := port(addr); got != want {
			t.Errorf("port(%q) = %d, want %d", addr, got, want)
		}
	}
}

// TestRefusePlainLogins: without HTTPS, a login over plain HTTP is taken
// only from a loopback peer (a browser on the machine, or a local reverse
// proxy that terminated TLS); the rest of the site is served.
func TestRefusePlainLogins(t *testing.T) {
	h := refusePlainLogins(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for _, tc := range []struct {
		method, path, remote string
		code                 int
	}{
		{"POST", "/login", "192.0.2.7:5555", 403},
		{"POST", "/admin/login", "[2001:db8::1]:5555", 403},
		{"POST", "/login", "127.0.0.1:5555", 204},
		{"POST", "/login", "[::1]:5555", 204},
		{"GET", "/login", "192.0.2.7:5555", 204},
		{"POST", "/act", "192.0.2.7:5555", 204},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.RemoteAddr = tc.remote
		r.Header.Set("X-Forwarded-For", "127.0.0.1") // never trusted
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.code {
			t.Errorf("%s %s from %s: %d, want %d", tc.method, tc.path, tc.remote, w.Code, tc.code)
		}
	}
}

func TestRedirectToHTTPS(t *testing.T) {
	auto := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, tc := range []struct {
		httpsAddr, host, path, want string
	}{
		{":443", "mail.example.org", "/login?x=1", "https://mail.example.org/login?x=1"},
		{":443", "mail.example.org:80", "/", "https://mail.example.org/"},
		{"127.0.0.1:8443", "127.0.0.1:8080", "/admin/", "https://127.0.0.1:8443/admin/"},
		{":443", "[2001:db8::1]:80", "/", "https://[2001:db8::1]/"},
		{":8443", "[2001:db8::1]", "/", "https://[2001:db8::1]:8443/"},
	} {
		r := httptest.NewRequest("POST", tc.path, nil)
		r.Host = tc.host
		w := httptest.NewRecorder()
		redirectToHTTPS(tc.httpsAddr, auto, nil).ServeHTTP(w, r)
		if w.Code != http.StatusPermanentRedirect || w.Header().Get("Location") != tc.want {
			t.Errorf("%s%s: %d %q, want %q", tc.host, tc.path, w.Code, w.Header().Get("Location"), tc.want)
		}
	}
	r := httptest.NewRequest("GET", "/.well-known/autoconfig/mail/config-v1.1.xml", nil)
	w := httptest.NewRecorder()
	redirectToHTTPS(":443", auto, nil).ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("autoconfig over plain HTTP: %d", w.Code)
	}
}
