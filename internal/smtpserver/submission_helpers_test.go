package smtpserver

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"pimail/internal/auth"
	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/password"
	"pimail/internal/store/sqlite"
)

func testTLS(t *testing.T) (*tls.Config, *tls.Config) {
	t.Helper()
	srv, cli := selfSigned(t)
	cli.ServerName = "mx.example.com"
	return srv, cli
}

// fakeQueue records what is queued (the real queue is tested in
// internal/queue; here only the hand-over matters).
type fakeQueue struct {
	mu      sync.Mutex
	entries []queued
	bounces []queued // raw is the reason
}

type queued struct {
	account int64
	from    string
	rcpts   []string
	raw     []byte
}

func (f *fakeQueue) Enqueue(_ context.Context, acct int64, from string, rcpts []string, raw []byte) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, queued{acct, from, append([]string(nil), rcpts...), append([]byte(nil), raw...)})
	return int64(len(f.entries)), nil
}

// Bounce records the notice's recipients and reason.
func (f *fakeQueue) Bounce(_ context.Context, from string, rcpts []string, reason string, _ []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bounces = append(f.bounces, queued{from: from, rcpts: append([]string(nil), rcpts...), raw: []byte(reason)})
}

func (f *fakeQueue) all() []queued {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]queued(nil), f.entries...)
}

type submitEnv struct {
	st        *sqlite.Store
	q         *fakeQueue
	srv       *Server
	addr      string // STARTTLS listener
	tlsAddr   string // implicit TLS listener
	clientTLS *tls.Config
	ids       map[string]int64
}

const (
	alicePW = "correct horse battery"
	bobPW   = "bob's secret"
)

func newSubmitEnv(t *testing.T, cfg Config) *submitEnv {
	t.Helper()
	return newSubmitEnvWith(t, cfg, auth.Limits{Delay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond})
}

// newSubmitEnvWith sets the login throttle's limits.
func newSubmitEnvWith(t *testing.T, cfg Config, limits auth.Limits) *submitEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &submitEnv{st: st, q: &fakeQueue{}, ids: map[string]int64{}}
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	fast := password.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}
	for addr, pw := range map[string]string{"alice@example.org": alicePW, "bob@example.org": bobPW} {
		h, err := password.HashParams(ctx, pw, fast)
		if err != nil {
			t.Fatal(err)
		}
		a, err := st.AddAccount(ctx, addr, h)
		if err != nil {
			t.Fatal(err)
		}
		e.ids[addr] = a.ID
		keys, err := password.SCRAMKeys(pw)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetSCRAM(ctx, addr, keys); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AddAlias(ctx, "info@example.org", []string{"alice@example.org"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAlias(ctx, "@example.org", []string{"alice@example.org"}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	dir := directory.New(st, quiet())
	if err := dir.Start(dctx); err != nil {
		t.Fatal(err)
	}
	serverTLS, clientTLS := testTLS(t)
	e.clientTLS = clientTLS
	cfg.Role = Submission
	cfg.Hostname = "mail.example.org"
	cfg.TLS = serverTLS
	cfg.SpoolDir = t.TempDir()
	srv, err := New(cfg, Deps{Pipeline: delivery.New(st, dir, quiet()), Dir: dir, Mailboxes: st, Queue: e.q,
		Auth: auth.NewWithLimits(st, quiet(), limits), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr, e.tlsAddr = ln.Addr().String(), tln.Addr().String()
	go srv.Serve(ln)
	go srv.ServeTLS(tln)
	t.Cleanup(func() { srv.Close() })
	return e
}

// mailbox returns the raw messages of an account's mailbox.
func (e *submitEnv) mailbox(t *testing.T, addr, name string) [][]byte {
	t.Helper()
	ctx := context.Background()
	mb, err := e.st.Mailbox(ctx, e.ids[addr], name)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := e.st.UIDs(ctx, mb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, m := range ms {
		raw, err := e.st.ReadBlob(ctx, m.BlobID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}
