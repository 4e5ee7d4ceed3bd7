package imapd

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/xdg-go/scram"

	"pimail/internal/auth"
	"pimail/internal/password"
	"pimail/internal/store/sqlite"
)

// logBuffer collects log output from the server's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// scramTestEnv is newTestEnv with the real Authenticator: alice and bob
// have testPassword, alice also SCRAM keys for it.
func scramTestEnv(t *testing.T, cfg Config, limits auth.Limits) (*testEnv, *logBuffer) {
	t.Helper()
	e := newTestEnv(t, cfg)
	e.srv.Close()
	ctx := context.Background()
	for _, u := range []string{"alice@example.org", "bob@example.org"} {
		h, err := password.HashParams(ctx, testPassword, password.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.st.SetPassword(ctx, u, h); err != nil {
			t.Fatal(err)
		}
	}
	k, err := password.SCRAMKeys(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetSCRAM(ctx, "alice@example.org", k); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	if cfg.TLS == nil {
		cfg.AllowInsecureAuth = true
	}
	srv := New(cfg, e.st, auth.NewWithLimits(e.st, logger, limits), logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	e.srv, e.addr = srv, ln.Addr().String()
	return e, logs
}

var _ *sqlite.Store // the env's store

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// scramRaw runs AUTHENTICATE SCRAM-SHA-256 on a raw connection with
// xdg-go/scram's client (client-first as SASL-IR initial response when ir
// is set) and returns the tagged response.
func scramRaw(t *testing.T, r *rawConn, tag, user, pass string, ir bool) string {
	t.Helper()
	cl, err := scram.SHA256.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	c1, _ := conv.Step("")
	if ir {
		r.send(tag + " AUTHENTICATE SCRAM-SHA-256 " + b64(c1) + "\r\n")
	} else {
		r.send(tag + " AUTHENTICATE SCRAM-SHA-256\r\n")
		if l := r.line(); l != "+ " {
			t.Fatalf("first challenge %q, want an empty one", l)
		}
		r.send(b64(c1) + "\r\n")
	}
	for i := 0; i < 4; i++ {
		l := r.line()
		if !strings.HasPrefix(l, "+ ") {
			if strings.HasPrefix(l, tag+" OK") && !conv.Valid() {
				t.Errorf("logged in without a verified server signature")
			}
			return l
		}
		ch, err := base64.StdEncoding.DecodeString(l[2:])
		if err != nil {
			t.Fatalf("challenge %q: %v", l, err)
		}
		resp, err := conv.Step(string(ch))
		if err != nil {
			t.Fatalf("client step on %q: %v", ch, err)
		}
		r.send(b64(resp) + "\r\n")
	}
	t.Fatal("too many challenges")
	return ""
}

func TestAuthenticateSCRAM(t *testing.T) {
	e, logs := scramTestEnv(t, Config{}, auth.Limits{})
	e.deliver("", "Subject: hi\r\n\r\nbody\r\n")
	r := e.raw()
	if c := r.cmd("c", "CAPABILITY")[0]; !strings.Contains(c, " AUTH=SCRAM-SHA-256 AUTH=PLAIN SASL-IR ") {
		t.Errorf("CAPABILITY = %q", c)
	}
	if l := scramRaw(t, r, "a", "alice@example.org", testPassword, false); !strings.HasPrefix(l, "a OK [CAPABILITY ") {
		t.Fatalf("SCRAM login: %q", l)
	}
	if res := r.cmd("s", "SELECT INBOX"); !strings.Contains(strings.Join(res, "\n"), "* 1 EXISTS") {
		t.Errorf("SELECT after SCRAM: %q", res)
	}

	r = e.raw()
	if l := scramRaw(t, r, "b", "ALICE@example.org", testPassword, true); !strings.HasPrefix(l, "b OK") {
		t.Fatalf("SCRAM with SASL-IR: %q", l)
	}

	for _, tc := range []struct{ user, pass, reason string }{
		{"alice@example.org", "wrong", "bad password"},
		{"nobody@example.org", testPassword, "unknown account"},
		{"bob@example.org", testPassword, "no scram keys"},
	} {
		r := e.raw()
		before := strings.Count(logs.String(), `msg="authentication failed"`)
		if l := scramRaw(t, r, "f", tc.user, tc.pass, false); !strings.HasPrefix(l, "f NO [AUTHENTICATIONFAILED]") {
			t.Errorf("%s/%s: %q", tc.user, tc.pass, l)
		}
		l := logs.String()
		if strings.Count(l, `msg="authentication failed"`) != before+1 || !strings.Contains(l, `user=`+tc.user+` reason="`+tc.reason+`"`) {
			t.Errorf("%s: failure not logged as %q:\n%s", tc.user, tc.reason, l)
		}
	}

	// Cancel at server-first, then a malformed client-first.
	r = e.raw()
	r.send("x AUTHENTICATE SCRAM-SHA-256 " + b64("n,,n=alice@example.org,r=abcdef") + "\r\n")
	if l := r.line(); !strings.HasPrefix(l, "+ ") {
		t.Fatalf("server-first: %q", l)
	}
	r.send("*\r\n")
	if l := r.line(); !strings.HasPrefix(l, "x BAD") {
		t.Errorf("cancel: %q", l)
	}
	if l := last(r.cmd("y", "AUTHENTICATE SCRAM-SHA-256 "+b64("garbage"))); !strings.HasPrefix(l, "y NO [AUTHENTICATIONFAILED]") {
		t.Errorf("malformed client-first: %q", l)
	}

	if err := e.st.SetAccountDisabled(context.Background(), "alice@example.org", true); err != nil {
		t.Fatal(err)
	}
	r = e.raw()
	if l := scramRaw(t, r, "d", "alice@example.org", testPassword, false); !strings.HasPrefix(l, "d NO [AUTHENTICATIONFAILED]") ||
		!strings.Contains(logs.String(), `reason="account disabled"`) {
		t.Errorf("disabled account: %q\n%s", l, logs)
	}
}

// Failed SCRAM proofs count as failed logins for LOGIN too.
func TestAuthenticateSCRAMRateLimit(t *testing.T) {
	e, _ := scramTestEnv(t, Config{}, auth.Limits{MaxFailures: 2})
	r := e.raw()
	for i := 0; i < 2; i++ {
		if l := scramRaw(t, r, "f", "alice@example.org", "wrong", false); !strings.HasPrefix(l, "f NO") {
			t.Fatalf("attempt %d: %q", i, l)
		}
	}
	r = e.raw()
	if l := last(r.cmd("l", "LOGIN alice@example.org "+testPassword)); !strings.HasPrefix(l, "l NO [UNAVAILABLE]") {
		t.Errorf("LOGIN after SCRAM failures: %q", l)
	}
}

// Without TLS from a non-loopback address SCRAM is neither advertised nor
// accepted, like PLAIN; with loopback auth allowed it is both.
func TestAuthenticateSCRAMNeedsTLS(t *testing.T) {
	e, _ := scramTestEnv(t, Config{TLS: testTLSConfig(t)}, auth.Limits{})
	r := e.raw()
	if c := r.cmd("c", "CAPABILITY")[0]; strings.Contains(c, "AUTH=") {
		t.Errorf("CAPABILITY without TLS: %q", c)
	}
	if l := last(r.cmd("a", "AUTHENTICATE SCRAM-SHA-256 "+b64("n,,n=alice@example.org,r=abc"))); !strings.HasPrefix(l, "a NO [PRIVACYREQUIRED]") {
		t.Errorf("SCRAM without TLS: %q", l)
	}
	e2, _ := scramTestEnv(t, Config{TLS: testTLSConfig(t), AllowLoopbackAuth: true}, auth.Limits{})
	r2 := e2.raw()
	if c := r2.cmd("c", "CAPABILITY")[0]; !strings.Contains(c, "AUTH=SCRAM-SHA-256") {
		t.Errorf("CAPABILITY on loopback: %q", c)
	}
	if l := scramRaw(t, r2, "a", "alice@example.org", testPassword, true); !strings.HasPrefix(l, "a OK") {
		t.Errorf("SCRAM on loopback: %q", l)
	}
}

// scramClient is a go-sasl client over xdg-go/scram, for go-imap's
// Authenticate.
type scramClient struct{ conv *scram.ClientConversation }

func (c *scramClient) Start() (string, []byte, error) {
	first, err := c.conv.Step("")
	return auth.MechSCRAMSHA256, []byte(first), err
}

func (c *scramClient) Next(challenge []byte) ([]byte, error) {
	if c.conv.Done() {
		return nil, nil
	}
	resp, err := c.conv.Step(string(challenge))
	return []byte(resp), err
}

// go-imap's client authenticates with SCRAM (SASL-IR, server-final as a
// last challenge answered empty).
func TestAuthenticateSCRAMGoClient(t *testing.T) {
	e, _ := scramTestEnv(t, Config{}, auth.Limits{})
	for _, tc := range []struct {
		pass string
		ok   bool
	}{{"wrong", false}, {testPassword, true}} {
		c, err := imapclient.DialInsecure(e.addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		cl, _ := scram.SHA256.NewClient("alice@example.org", tc.pass, "")
		sc := &scramClient{conv: cl.NewConversation()}
		err = c.Authenticate(sc)
		if (err == nil) != tc.ok {
			t.Errorf("password %q: Authenticate = %v", tc.pass, err)
		}
		if tc.ok {
			if !sc.conv.Valid() {
				t.Error("server signature not verified")
			}
			if _, err := c.Select("INBOX", nil).Wait(); err != nil {
				t.Errorf("SELECT: %v", err)
			}
		}
		c.Close()
	}
}
