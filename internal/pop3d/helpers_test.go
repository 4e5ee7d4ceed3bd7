package pop3d

import (
	"bufio"
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
	"os"
	"strings"
	"testing"
	"time"

	"pimail/internal/auth"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

const testPassword = "secret pass" // with a space: PASS takes the rest of the line

// testAuth accepts testPassword for any account in the store.
type testAuth struct{ st store.Store }

func (a testAuth) Authenticate(ctx context.Context, user, pass, _ string) (store.Account, error) {
	if pass != testPassword {
		return store.Account{}, auth.ErrInvalidCredentials
	}
	acct, err := a.st.Account(ctx, strings.ToLower(user))
	if err != nil {
		return store.Account{}, auth.ErrInvalidCredentials
	}
	return acct, nil
}

type testEnv struct {
	t    *testing.T
	st   *sqlite.Store
	srv  *Server
	addr string
	acct store.Account
	inbx store.Mailbox
}

func testLogger() *slog.Logger {
	if os.Getenv("POP3D_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// openStore opens a SQLite store in a temp dir with alice and bob.
func openStore(t *testing.T) (*sqlite.Store, store.Account) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: testLogger()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	acct, err := st.AddAccount(ctx, "alice@example.org", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddAccount(ctx, "bob@example.org", ""); err != nil {
		t.Fatal(err)
	}
	return st, acct
}

// newTestEnv starts a server on loopback; wrap, when not nil, wraps the
// listener (implicit TLS, a fake remote address).
func newTestEnv(t *testing.T, cfg Config, wrap func(net.Listener) net.Listener) *testEnv {
	t.Helper()
	st, acct := openStore(t)
	return startServer(t, st, acct, cfg, testAuth{st}, wrap)
}

func startServer(t *testing.T, st *sqlite.Store, acct store.Account, cfg Config, authn Authenticator, wrap func(net.Listener) net.Listener) *testEnv {
	t.Helper()
	srv := New(cfg, st, authn, testLogger())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve returned %v after Close", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	inbx, err := st.Mailbox(context.Background(), acct.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, st: st, srv: srv, addr: addr, acct: acct, inbx: inbx}
}

// deliver stores raw into alice's INBOX.
func (e *testEnv) deliver(raw string) store.Delivered {
	e.t.Helper()
	d, err := e.st.Deliver(context.Background(), store.Delivery{
		Raw:        []byte(raw),
		Recipients: []store.Recipient{{AccountID: e.acct.ID}},
	})
	if err != nil {
		e.t.Fatalf("deliver: %v", err)
	}
	return d[0]
}

// inbox returns the messages in alice's INBOX.
func (e *testEnv) inbox() []store.MessageMeta {
	e.t.Helper()
	m, err := e.st.UIDs(context.Background(), e.inbx.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// conn is a line-oriented POP3 test client.
type conn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (e *testEnv) dial() *conn {
	e.t.Helper()
	c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.wrapConn(c)
}

func (e *testEnv) wrapConn(c net.Conn) *conn {
	e.t.Helper()
	e.t.Cleanup(func() { c.Close() })
	pc := &conn{t: e.t, c: c, br: bufio.NewReader(c)}
	if g := pc.line(); !strings.HasPrefix(g, "+OK ") {
		e.t.Fatalf("greeting %q", g)
	}
	return pc
}

func (c *conn) send(s string) {
	c.t.Helper()
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// rawLine reads one line with its CRLF.
func (c *conn) rawLine() string {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := c.br.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (got %q)", err, l)
	}
	if !strings.HasSuffix(l, "\r\n") {
		c.t.Fatalf("line without CRLF: %q", l)
	}
	return l
}

func (c *conn) line() string { return strings.TrimSuffix(c.rawLine(), "\r\n") }

// cmd sends a command and returns the first response line.
func (c *conn) cmd(command string) string {
	c.t.Helper()
	c.send(command + "\r\n")
	return c.line()
}

// ok sends a command and fails unless the response is positive.
func (c *conn) ok(command string) string {
	c.t.Helper()
	r := c.cmd(command)
	if !strings.HasPrefix(r, "+OK") {
		c.t.Fatalf("%s: %q", command, r)
	}
	return r
}

// multi reads the body of a multi-line response up to the terminating
// ".", raw (still byte-stuffed, with CRLFs).
func (c *conn) multi() string {
	c.t.Helper()
	var b strings.Builder
	for i := 0; i < 1_000_000; i++ {
		l := c.rawLine()
		if l == ".\r\n" {
			return b.String()
		}
		b.WriteString(l)
	}
	c.t.Fatal("multi-line response without end")
	return ""
}

// multiLines runs a command with a multi-line answer and returns its lines.
func (c *conn) multiLines(command string) []string {
	c.t.Helper()
	c.ok(command)
	body := strings.TrimSuffix(c.multi(), "\r\n")
	if body == "" {
		return nil
	}
	return strings.Split(body, "\r\n")
}

func (c *conn) login(user string) {
	c.t.Helper()
	c.ok("USER " + user)
	c.ok("PASS " + testPassword)
}

// closed fails unless the server closes the connection (after at most a
// few lines).
func (c *conn) closed() {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := 0; i < 10; i++ {
		if _, err := c.br.ReadString('\n'); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				c.t.Fatal("connection still open")
			}
			return
		}
	}
	c.t.Fatal("connection still open")
}

// selfSigned returns a TLS config with a fresh self-signed certificate
// for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pop3d test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}, pool
}

// remoteListener makes accepted connections appear to come from a
// non-loopback address, to test the plain-text login policy end to end.
type remoteListener struct{ net.Listener }

func (l remoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{c}, nil
}

type remoteConn struct{ net.Conn }

func (remoteConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 40000}
}

func fromRemote(ln net.Listener) net.Listener { return remoteListener{ln} }
