package submission

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"pimail/internal/auth"
	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/password"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testTLS(t *testing.T) (*tls.Config, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mail.example.org"},
		DNSNames: []string{"mail.example.org"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, ServerName: "mail.example.org"}
}

// fakeQueue records what is queued (the real queue is tested in
// internal/queue; here only the hand-over matters).
type fakeQueue struct {
	mu      sync.Mutex
	entries []queued
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

func (f *fakeQueue) all() []queued {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]queued(nil), f.entries...)
}

type env struct {
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

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{st: st, q: &fakeQueue{}, ids: map[string]int64{}}
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
	cfg.Hostname = "mail.example.org"
	cfg.TLS = serverTLS
	if cfg.AuthDelay == 0 {
		cfg.AuthDelay = 10 * time.Millisecond
	}
	srv, err := New(cfg, Deps{Store: st, Dir: dir, Local: delivery.New(st, dir, quiet()), Queue: e.q, Auth: auth.New(st, quiet()), Logger: quiet()})
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
func (e *env) mailbox(t *testing.T, addr, name string) [][]byte {
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

var _ store.Store = (*sqlite.Store)(nil)
