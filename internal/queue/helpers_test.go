package queue

import (
	"bytes"
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
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/dkim"
	"pimail/internal/dnsresolver"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// selfSigned makes a certificate for the names (and 127.0.0.1).
func selfSigned(t *testing.T, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// fakeDNS answers from maps; names are lower case without trailing dot.
type fakeDNS struct {
	mu   sync.Mutex
	mx   map[string][]dnsresolver.MXRecord
	a    map[string][]netip.Addr
	txt  map[string][]string
	nx   map[string]bool
	hits map[string]int
}

func newFakeDNS() *fakeDNS {
	return &fakeDNS{mx: map[string][]dnsresolver.MXRecord{}, a: map[string][]netip.Addr{}, txt: map[string][]string{}, nx: map[string]bool{}, hits: map[string]int{}}
}

func (f *fakeDNS) LookupA(_ context.Context, name string) ([]dnsresolver.AddrRecord, dnsresolver.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []dnsresolver.AddrRecord
	for _, ip := range f.a[name] {
		out = append(out, dnsresolver.AddrRecord{IP: ip, TTL: time.Minute})
	}
	return out, dnsresolver.Result{}, nil
}

func (f *fakeDNS) LookupAAAA(context.Context, string) ([]dnsresolver.AddrRecord, dnsresolver.Result, error) {
	return nil, dnsresolver.Result{}, nil
}

func (f *fakeDNS) LookupTXT(_ context.Context, name string) ([]dnsresolver.TXTRecord, dnsresolver.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []dnsresolver.TXTRecord
	for _, t := range f.txt[name] {
		out = append(out, dnsresolver.TXTRecord{Strings: []string{t}, Text: t})
	}
	return out, dnsresolver.Result{}, nil
}

func (f *fakeDNS) LookupMX(_ context.Context, name string) ([]dnsresolver.MXRecord, dnsresolver.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hits[name]++
	return f.mx[name], dnsresolver.Result{NXDomain: f.nx[name]}, nil
}

// received is one message a test server accepted.
type received struct {
	from  string
	rcpts []string
	data  []byte
	tls   bool
}

// mxServer is a scripted SMTP server on loopback.
type mxServer struct {
	addr string
	port int
	srv  *smtp.Server

	mu       sync.Mutex
	rcptErr  func(n int, to string) error // n counts RCPT commands so far
	hangData chan struct{}                // when set, DATA waits for it to close
	rcptN    int
	conns    int
	got      []received
}

func startMX(t *testing.T, withTLS bool) *mxServer {
	t.Helper()
	m := &mxServer{}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		m.mu.Lock()
		m.conns++
		m.mu.Unlock()
		_, isTLS := c.TLSConnectionState()
		return &mxSession{m: m, tls: isTLS}, nil
	}))
	s.Domain = "mx.test"
	s.AllowInsecureAuth = true
	s.ReadTimeout = 10 * time.Second
	s.WriteTimeout = 10 * time.Second
	if withTLS {
		cert, _ := selfSigned(t, "mx.test")
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.addr = ln.Addr().String()
	m.port = ln.Addr().(*net.TCPAddr).Port
	m.srv = s
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return m
}

func (m *mxServer) messages() []received {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]received(nil), m.got...)
}

func (m *mxServer) connections() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conns
}

type mxSession struct {
	m     *mxServer
	tls   bool
	from  string
	rcpts []string
}

func (s *mxSession) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	s.rcpts = nil
	return nil
}

func (s *mxSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.m.mu.Lock()
	s.m.rcptN++
	n, fn := s.m.rcptN, s.m.rcptErr
	s.m.mu.Unlock()
	if fn != nil {
		if err := fn(n, to); err != nil {
			return err
		}
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

func (s *mxSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.m.mu.Lock()
	hang := s.m.hangData
	s.m.mu.Unlock()
	if hang != nil {
		<-hang
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "gone"}
	}
	s.m.mu.Lock()
	s.m.got = append(s.m.got, received{from: s.from, rcpts: s.rcpts, data: b, tls: s.tls})
	s.m.mu.Unlock()
	return nil
}

func (s *mxSession) Reset()        { s.from, s.rcpts = "", nil }
func (s *mxSession) Logout() error { return nil }

// env is a store with example.org (alice, bob), a directory view, the
// delivery pipeline and a queue.
type env struct {
	dirPath string
	st      *sqlite.Store
	dir     *directory.View
	pipe    *delivery.Pipeline
	q       *Queue
	dns     *fakeDNS
	cfg     Config
	ids     map[string]int64
	cancel  context.CancelFunc
}

func testConfig() Config {
	return Config{
		Hostname:       "mail.example.org",
		PollInterval:   50 * time.Millisecond,
		Lease:          5 * time.Second,
		RetryInitial:   50 * time.Millisecond,
		RetryMax:       200 * time.Millisecond,
		ConnectTimeout: 2 * time.Second,
		CommandTimeout: 5 * time.Second,
		DelayNotice:    -1,
		Transports:     map[string]Transport{},
	}
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	e := &env{dirPath: t.TempDir(), dns: newFakeDNS(), cfg: cfg, ids: map[string]int64{}}
	e.open(t)
	ctx := context.Background()
	if _, err := e.st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"alice@example.org", "bob@example.org"} {
		acc, err := e.st.AddAccount(ctx, a, "")
		if err != nil {
			t.Fatal(err)
		}
		e.ids[a] = acc.ID
	}
	if err := e.dir.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// open opens the store at dirPath and starts a queue over it.
func (e *env) open(t *testing.T) {
	t.Helper()
	st, err := sqlite.Open(e.dirPath, sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	e.st = st
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.dir = directory.New(st, quiet())
	if err := e.dir.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.pipe = delivery.New(st, e.dir, quiet())
	q, err := New(e.cfg, Deps{Store: st, Dir: e.dir, Local: e.pipe, Resolver: e.dns, Signer: dkim.NewSigner(st, quiet()), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	e.q = q
	q.Start()
	t.Cleanup(func() { e.close() })
}

func (e *env) close() {
	e.q.Close()
	e.cancel()
	e.st.Close()
}

const outMsg = "From: Alice <alice@example.org>\r\n" +
	"To: <rcpt@remote.example>\r\n" +
	"Subject: Outbound\r\n" +
	"Date: Tue, 02 Jan 2024 15:04:05 +0100\r\n" +
	"Message-ID: <out1@example.org>\r\n" +
	"\r\n" +
	"Hello remote.\r\n"

// waitFor polls cond every 20 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inbox returns the raw messages in an account's INBOX.
func (e *env) inbox(t *testing.T, addr string) [][]byte {
	t.Helper()
	ctx := context.Background()
	mb, err := e.st.Mailbox(ctx, e.ids[addr], "INBOX")
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

func (e *env) queueLen(t *testing.T) int {
	t.Helper()
	all, err := e.st.QueueEntries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(all)
}

func (e *env) entry(t *testing.T, id int64) store.QueueEntry {
	t.Helper()
	en, err := e.st.QueueEntry(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return en
}

func hasHeader(raw []byte, name string) bool {
	return bytes.Contains(raw, []byte("\r\n"+name+":")) || bytes.HasPrefix(raw, []byte(name+":"))
}

var _ = strings.Contains
