package pop3d

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/xdg-go/scram"

	"pimail/internal/auth"
	"pimail/internal/password"
	"pimail/internal/store/sqlite"
)

// lockedBuffer collects log output from the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// scramEnv is a server with the real Authenticator: alice has a password
// and SCRAM keys for it, bob a password without keys.
func scramEnv(t *testing.T, cfg Config, limits auth.Limits) (*testEnv, *lockedBuffer, *sqlite.Store) {
	t.Helper()
	st, acct := openStore(t)
	ctx := context.Background()
	for _, u := range []string{"alice@example.org", "bob@example.org"} {
		h, err := password.HashParams(ctx, testPassword, password.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetPassword(ctx, u, h); err != nil {
			t.Fatal(err)
		}
	}
	k, err := password.SCRAMKeys(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetSCRAM(ctx, "alice@example.org", k); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	a := auth.NewWithLimits(st, slog.New(slog.NewTextHandler(logs, nil)), limits)
	return startServer(t, st, acct, cfg, a, nil), logs, st
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// scramAuth runs AUTH SCRAM-SHA-256 with xdg-go/scram's client (with the
// client-first as initial response when ir is set) and returns the final
// response line.
func scramAuth(t *testing.T, c *conn, user, pass string, ir bool) string {
	t.Helper()
	cl, err := scram.SHA256.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	c1, _ := conv.Step("")
	var r string
	if ir {
		r = c.cmd("AUTH SCRAM-SHA-256 " + b64(c1))
	} else {
		if r = c.cmd("AUTH SCRAM-SHA-256"); r != "+ " {
			t.Fatalf("AUTH SCRAM-SHA-256 = %q, want an empty challenge", r)
		}
		r = c.cmd(b64(c1))
	}
	for step := 0; step < 3 && strings.HasPrefix(r, "+ "); step++ {
		ch, err := base64.StdEncoding.DecodeString(r[2:])
		if err != nil {
			t.Fatalf("challenge %q: %v", r, err)
		}
		resp, err := conv.Step(string(ch))
		if err != nil {
			t.Fatalf("client step on %q: %v", ch, err)
		}
		r = c.cmd(b64(resp))
	}
	if strings.HasPrefix(r, "+OK") && !conv.Valid() {
		t.Errorf("logged in without a verified server signature")
	}
	return r
}

func TestAuthSCRAM(t *testing.T) {
	e, logs, st := scramEnv(t, Config{}, auth.Limits{})
	e.deliver(msg1)
	c := e.dial()
	caps := c.multiLines("CAPA")
	if !contains(caps, "SASL SCRAM-SHA-256 PLAIN") {
		t.Errorf("CAPA = %q, want SASL SCRAM-SHA-256 PLAIN", caps)
	}
	if l := c.multiLines("AUTH"); strings.Join(l, ",") != "SCRAM-SHA-256,PLAIN" {
		t.Errorf("AUTH list = %q", l)
	}
	if r := scramAuth(t, c, "alice@example.org", testPassword, false); !strings.HasPrefix(r, "+OK") {
		t.Fatalf("SCRAM login = %q", r)
	}
	if r := c.ok("STAT"); !strings.HasPrefix(r, "+OK 1 ") {
		t.Errorf("STAT = %q", r)
	}
	c.ok("QUIT")

	// Initial response (RFC 5034 §4), user name in another case.
	c = e.dial()
	if r := scramAuth(t, c, "Alice@Example.org", testPassword, true); !strings.HasPrefix(r, "+OK") {
		t.Fatalf("SCRAM login with initial response = %q", r)
	}
	c.ok("QUIT")

	for _, tc := range []struct{ user, pass, reason string }{
		{"alice@example.org", "wrong", "bad password"},
		{"nobody@example.org", testPassword, "unknown account"},
		{"bob@example.org", testPassword, "no scram keys"},
	} {
		c := e.dial()
		before := strings.Count(logs.String(), `msg="authentication failed"`)
		if r := scramAuth(t, c, tc.user, tc.pass, false); !strings.HasPrefix(r, "-ERR [AUTH]") {
			t.Errorf("%s/%s = %q", tc.user, tc.pass, r)
		}
		l := logs.String()
		if strings.Count(l, `msg="authentication failed"`) != before+1 || !strings.Contains(l, `user=`+tc.user+` reason="`+tc.reason+`"`) {
			t.Errorf("%s: failure not logged as %q:\n%s", tc.user, tc.reason, l)
		}
		// The session is still in AUTHORIZATION state.
		if r := c.cmd("STAT"); !strings.HasPrefix(r, "-ERR") {
			t.Errorf("STAT after failed SCRAM = %q", r)
		}
	}

	// Cancelled at the server-first challenge.
	c = e.dial()
	cl, _ := scram.SHA256.NewClient("alice@example.org", testPassword, "")
	c1, _ := cl.NewConversation().Step("")
	if r := c.cmd("AUTH SCRAM-SHA-256 " + b64(c1)); !strings.HasPrefix(r, "+ ") {
		t.Fatalf("server-first = %q", r)
	}
	if r := c.cmd("*"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("cancel = %q", r)
	}
	if r := c.cmd("AUTH SCRAM-SHA-256 " + b64("garbage")); !strings.HasPrefix(r, "-ERR [AUTH]") {
		t.Errorf("malformed client-first = %q", r)
	}

	// A disabled account fails with the right password.
	if err := st.SetAccountDisabled(context.Background(), "alice@example.org", true); err != nil {
		t.Fatal(err)
	}
	c = e.dial()
	if r := scramAuth(t, c, "alice@example.org", testPassword, false); !strings.HasPrefix(r, "-ERR [AUTH]") ||
		!strings.Contains(logs.String(), `reason="account disabled"`) {
		t.Errorf("disabled account = %q\n%s", r, logs)
	}
}

// Failed SCRAM proofs count as failed logins: after MaxFailures, PASS is
// refused as rate limited too.
func TestAuthSCRAMRateLimit(t *testing.T) {
	e, _, _ := scramEnv(t, Config{}, auth.Limits{MaxFailures: 2})
	c := e.dial()
	for i := 0; i < 2; i++ {
		if r := scramAuth(t, c, "alice@example.org", "wrong", false); !strings.HasPrefix(r, "-ERR [AUTH]") {
			t.Fatalf("attempt %d = %q", i, r)
		}
	}
	c.ok("USER alice@example.org")
	if r := c.cmd("PASS " + testPassword); !strings.HasPrefix(r, "-ERR [SYS/TEMP]") {
		t.Errorf("PASS after SCRAM failures = %q, want rate limited", r)
	}
	c = e.dial() // three failures closed the session (maxAuthFailures)
	if r := c.cmd("AUTH SCRAM-SHA-256 " + b64("n,,n=alice@example.org,r=abc")); !strings.HasPrefix(r, "-ERR [SYS/TEMP]") {
		t.Errorf("SCRAM when locked out = %q", r)
	}
}

// Without TLS from the network SCRAM is neither offered nor accepted,
// like PLAIN.
func TestAuthSCRAMNeedsTLS(t *testing.T) {
	st, acct := openStore(t)
	e := startServer(t, st, acct, Config{}, auth.New(st, testLogger()), fromRemote)
	c := e.dial()
	for _, l := range c.multiLines("CAPA") {
		if strings.HasPrefix(l, "SASL") {
			t.Errorf("CAPA offers %q without TLS", l)
		}
	}
	if r := c.cmd("AUTH SCRAM-SHA-256 " + b64("n,,n=alice@example.org,r=abc")); !strings.HasPrefix(r, "-ERR [AUTH]") || !strings.Contains(r, "TLS") {
		t.Errorf("SCRAM without TLS = %q", r)
	}
}
