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
