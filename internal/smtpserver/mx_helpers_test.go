package smtpserver

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
	"net/textproto"
	"strings"
	"testing"
	"time"

	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/metrics"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// env is a running server over a real SQLite store with:
// example.com: accounts alice, bob, carol, dave;
// team@example.com → alice, bob; example.org: catch-all → carol.
type env struct {
	st   *sqlite.Store
	dir  *directory.View
	srv  *Server
	addr string
	ids  map[string]int64
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	return newEnvWith(t, cfg, nil)
}

// newEnvWith lets a test replace the store the pipeline writes to.
func newEnvWith(t *testing.T, cfg Config, wrap func(*sqlite.Store) store.Store) *env {
	t.Helper()
	return newEnvLogged(t, cfg, Deps{}, wrap, quiet())
}

// newEnvLogged lets a test give the server's collaborators (blocklists)
// and see its log.
func newEnvLogged(t *testing.T, cfg Config, deps Deps, wrap func(*sqlite.Store) store.Store, logger *slog.Logger) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	e := &env{st: st, ids: map[string]int64{}}
	for _, d := range []string{"example.com", "example.org"} {
		if _, err := st.AddDomain(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"alice@example.com", "bob@example.com", "carol@example.com", "dave@example.com"} {
		acc, err := st.AddAccount(ctx, a, "")
		if err != nil {
			t.Fatalf("add account %s: %v", a, err)
		}
		e.ids[a] = acc.ID
	}
	if err := st.AddAlias(ctx, "team@example.com", []string{"alice@example.com", "bob@example.com"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAlias(ctx, "@example.org", []string{"carol@example.com"}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	e.dir = directory.New(st, quiet())
	if err := e.dir.Start(dctx); err != nil {
		t.Fatal(err)
	}
	var ps store.Store = st
	if wrap != nil {
		ps = wrap(st)
	}
	pipe := delivery.New(ps, e.dir, quiet())
	if cfg.Hostname == "" {
		cfg.Hostname = "mx.example.com"
	}
	if cfg.PregreetWait == 0 {
		cfg.PregreetWait = -1 // tests of the pregreet wait set it themselves
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	if deps.Logger == nil {
		deps.Logger = logger
	}
	deps.Pipeline = pipe
	srv, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := e.srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
		cancel()
		st.Close()
	})
	return e
}

// refusedConns is how many connections this server's protocol refused
// for reason so far (the metrics are global; tests take differences).
func refusedConns(reason string) uint64 {
	return metrics.ConnectionsRefused.With(metrics.ProtoSMTP, reason).Value()
}

// messages counts stored mailbox rows.
func (e *env) messages(t *testing.T) int64 {
	t.Helper()
	s, err := e.st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Messages
}

// inbox returns the raw INBOX messages of an account, oldest first.
func (e *env) inbox(t *testing.T, addr string) []string {
	t.Helper()
	ctx := context.Background()
	mb, err := e.st.Mailbox(ctx, e.ids[addr], "INBOX")
	if err != nil {
		t.Fatalf("INBOX of %s: %v", addr, err)
	}
	msgs, err := e.st.UIDs(ctx, mb.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		raw, err := e.st.ReadBlob(ctx, m.BlobID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(raw))
	}
	return out
}

// client is a raw SMTP client for exact control over the bytes sent.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *textproto.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	return dialFrom(t, addr, "")
}

// dialFrom connects from a given loopback source address ("" for any) and
// reads the greeting, which must be 220.
func dialFrom(t *testing.T, addr, src string) *client {
	t.Helper()
	c := connect(t, addr, src)
	if code, msg := c.reply(); code != 220 {
		t.Fatalf("greeting %d %s", code, msg)
	}
	return c
}

// connect opens a connection from src ("" for any) and reads nothing.
func connect(t *testing.T, addr, src string) *client {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &client{t: t}
	c.setConn(conn)
	return c
}

func (c *client) setConn(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	c.conn = conn
	c.r = textproto.NewReader(bufio.NewReader(conn))
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// reply reads one (possibly multi-line) reply.
func (c *client) reply() (int, string) {
	c.t.Helper()
	code, msg, err := c.r.ReadResponse(0)
	if err != nil {
		c.t.Fatalf("read reply: %v", err)
	}
	return code, msg
}

// cmd sends one command line and returns the reply.
func (c *client) cmd(line string) (int, string) {
	c.t.Helper()
	c.send(line + "\r\n")
	return c.reply()
}

// expect sends a command and fails unless the reply has the given code.
func (c *client) expect(line string, code int) string {
	c.t.Helper()
	got, msg := c.cmd(line)
	if got != code {
		c.t.Fatalf("%q: got %d %s, want %d", line, got, msg, code)
	}
	return msg
}

// expectReply reads a reply and fails unless it has the given code.
func (c *client) expectReply(code int, what string) string {
	c.t.Helper()
	got, msg := c.reply()
	if got != code {
		c.t.Fatalf("%s: got %d %s, want %d", what, got, msg, code)
	}
	return msg
}

// expectClosed fails unless the server closes the connection.
func (c *client) expectClosed() {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := c.r.ReadLine()
	if err == nil {
		c.t.Fatalf("connection still open, got %q", line)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatalf("connection not closed within 5s")
	}
}

const simpleMessage = "From: sender@remote.test\r\nTo: alice@example.com\r\nSubject: test\r\n\r\nHello.\r\n"

// transaction runs MAIL, RCPTs (all expected to pass) and DATA with body,
// which must not contain the terminator; it returns the final reply.
func (c *client) transaction(from string, rcpts []string, body string) (int, string) {
	c.t.Helper()
	c.expect("MAIL FROM:<"+from+">", 250)
	for _, r := range rcpts {
		c.expect("RCPT TO:<"+r+">", 250)
	}
	c.expect("DATA", 354)
	c.send(body + "\r\n.\r\n")
	return c.reply()
}

// selfSigned returns a server TLS config and a client config trusting it.
func selfSigned(t *testing.T) (*tls.Config, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mx.example.com"},
		DNSNames:     []string{"mx.example.com"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
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
	srv := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	cli := &tls.Config{RootCAs: pool, ServerName: "mx.example.com"}
	return srv, cli
}

func hasLine(multi, want string) bool {
	for _, l := range strings.Split(multi, "\n") {
		if strings.EqualFold(strings.TrimSpace(l), want) || strings.HasPrefix(strings.ToUpper(l), strings.ToUpper(want)+" ") {
			return true
		}
	}
	return false
}
