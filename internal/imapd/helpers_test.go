package imapd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
	"pimail/internal/testcorpus"
)

const testPassword = "secret"

// testAuth accepts testPassword for any account in the store.
type testAuth struct{ st store.Store }

func (a testAuth) Authenticate(ctx context.Context, user, pass, _ string) (store.Account, error) {
	if pass != testPassword {
		return store.Account{}, errors.New("invalid credentials")
	}
	return a.st.Account(ctx, strings.ToLower(user))
}

type testEnv struct {
	t    *testing.T
	st   *sqlite.Store
	srv  *Server
	addr string
	acct store.Account
}

func newTestEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	ctx := context.Background()
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	acct, err := st.AddAccount(ctx, "alice@example.org", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddAccount(ctx, "bob@example.org", "x"); err != nil {
		t.Fatal(err)
	}
	cfg.AllowInsecureAuth = cfg.AllowInsecureAuth || cfg.TLS == nil
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("IMAPD_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv := New(cfg, st, testAuth{st}, logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	env := &testEnv{t: t, st: st, srv: srv, addr: ln.Addr().String(), acct: acct}
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return env
}

// deliver stores raw into the account's mailbox (INBOX when empty).
func (e *testEnv) deliver(mailbox string, raw string) store.Delivered {
	e.t.Helper()
	d, err := e.st.Deliver(context.Background(), store.Delivery{
		Raw:          []byte(raw),
		InternalDate: time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC),
		Recipients:   []store.Recipient{{AccountID: e.acct.ID, Mailbox: mailbox}},
	})
	if err != nil {
		e.t.Fatalf("deliver: %v", err)
	}
	return d[0]
}

// client returns a logged-in go-imap client.
func (e *testEnv) client(opts *imapclient.Options) *imapclient.Client {
	e.t.Helper()
	c, err := imapclient.DialInsecure(e.addr, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	if err := c.Login("alice@example.org", testPassword).Wait(); err != nil {
		e.t.Fatalf("login: %v", err)
	}
	return c
}

// rawConn is a line-oriented test connection.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (e *testEnv) raw() *rawConn {
	e.t.Helper()
	c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	rc := &rawConn{t: e.t, c: c, br: bufio.NewReader(c)}
	if g := rc.line(); !strings.HasPrefix(g, "* OK") {
		e.t.Fatalf("greeting %q", g)
	}
	return rc
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	_ = r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatalf("send: %v", err)
	}
}

func (r *rawConn) line() string {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := r.br.ReadString('\n')
	if err != nil {
		r.t.Fatalf("read: %v (got %q)", err, l)
	}
	return strings.TrimRight(l, "\r\n")
}

// until reads lines up to and including the one starting with prefix.
func (r *rawConn) until(prefix string) []string {
	r.t.Helper()
	var lines []string
	for i := 0; i < 10000; i++ {
		l := r.line()
		lines = append(lines, l)
		if strings.HasPrefix(l, prefix) {
			return lines
		}
	}
	r.t.Fatalf("no line starting with %q", prefix)
	return nil
}

// cmd sends a command and returns its responses, the tagged one last.
func (r *rawConn) cmd(tag, command string) []string {
	r.t.Helper()
	r.send(tag + " " + command + "\r\n")
	return r.until(tag + " ")
}

func (r *rawConn) login() {
	r.t.Helper()
	if res := r.cmd("L", "LOGIN alice@example.org "+testPassword); !strings.HasPrefix(res[len(res)-1], "L OK") {
		r.t.Fatalf("login: %q", res)
	}
}

func last(lines []string) string { return lines[len(lines)-1] }

// corpusGlob lists the files of the test corpus (testdata/corpus) that
// match pattern; none is an error.
func corpusGlob(t *testing.T, pattern string) []string {
	t.Helper()
	dir, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(matches) == 0 {
		t.Fatalf("no test corpus file matches %s", pattern)
	}
	return matches
}

// corpusFile reads the first message of the test corpus matching pattern.
func corpusFile(t *testing.T, pattern string) []byte {
	t.Helper()
	b, err := os.ReadFile(corpusGlob(t, pattern)[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}
