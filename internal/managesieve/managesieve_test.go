package managesieve

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"

	"pimail/internal/auth"
	"pimail/internal/password"
	"pimail/internal/store/sqlite"
)

const testPassword = "correct horse battery"

type env struct {
	t    *testing.T
	st   *sqlite.Store
	addr string
	id   int64
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv starts a server over a real store and authenticator, with the
// account alice@example.org (and bob@example.org).
func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	hash, err := password.Hash(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.AddAccount(ctx, "alice@example.org", hash)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddAccount(ctx, "bob@example.org", hash); err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil {
		cfg.TLS = testTLS(t)
	}
	srv := New(cfg, st, auth.New(st, quiet()), quiet())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &env{t: t, st: st, addr: ln.Addr().String(), id: a.ID}
}

func testTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// client speaks the protocol line by line.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func (e *env) dial() *client {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	cl := &client{t: e.t, conn: c, r: bufio.NewReader(c)}
	if greet := cl.response(); !strings.HasPrefix(greet[len(greet)-1], "OK") {
		e.t.Fatalf("greeting %q", greet)
	}
	return cl
}

func (c *client) send(s string) { c.t.Helper(); fmt.Fprint(c.conn, s+"\r\n") }

// response reads lines up to and including an OK, NO or BYE line.
func (c *client) response() []string {
	c.t.Helper()
	var lines []string
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("read: %v (after %q)", err, lines)
		}
		l = strings.TrimRight(l, "\r\n")
		lines = append(lines, l)
		if strings.HasPrefix(l, "OK") || strings.HasPrefix(l, "NO") || strings.HasPrefix(l, "BYE") {
			return lines
		}
	}
}

// do sends a command and returns the final line of its response.
func (c *client) do(cmd string) string {
	c.t.Helper()
	c.send(cmd)
	r := c.response()
	return r[len(r)-1]
}

func literal(s string) string { return fmt.Sprintf("{%d+}\r\n%s", len(s), s) }

func (c *client) login(user string) {
	c.t.Helper()
	ir := base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + testPassword))
	if got := c.do(`AUTHENTICATE "PLAIN" "` + ir + `"`); !strings.HasPrefix(got, "OK") {
		c.t.Fatalf("login: %q", got)
	}
}

// TestSession drives a whole session: capabilities, login, PUTSCRIPT,
// CHECKSCRIPT and PUTSCRIPT errors with their place, SETACTIVE,
// LISTSCRIPTS, GETSCRIPT, RENAMESCRIPT, DELETESCRIPT and the response
// codes of RFC 5804.
func TestSession(t *testing.T) {
	e := newEnv(t, Config{MaxScripts: 3, MaxScriptSize: 1000, MaxRedirects: 4})
	c := e.dial()
	c.send("CAPABILITY")
	caps := strings.Join(c.response(), "\n")
	for _, want := range []string{`"IMPLEMENTATION" "pimail"`, `"SASL" "PLAIN SCRAM-SHA-256"`, `"STARTTLS"`,
		`"MAXREDIRECTS" "4"`, `"VERSION" "1.0"`, `fileinto`, `vacation`, `imap4flags`} {
		if !strings.Contains(caps, want) {
			t.Errorf("capabilities lack %s:\n%s", want, caps)
		}
	}
	if got := c.do(`LISTSCRIPTS`); !strings.HasPrefix(got, "NO") {
		t.Errorf("LISTSCRIPTS before login: %q", got)
	}
	c.login("alice@example.org")

	script := "require [\"fileinto\"];\r\nif header :contains \"subject\" \"x\" {\r\n  fileinto \"X\";\r\n}\r\n"
	if got := c.do(`PUTSCRIPT "rules" ` + literal(script)); got != `OK "Script stored"` {
		t.Fatalf("PUTSCRIPT: %q", got)
	}
	// Errors name the line and column.
	bad := "require [\"fileinto\"];\r\nif header :contains \"subject\" \"x\" {\r\n  filein \"X\";\r\n}\r\n"
	if got := c.do(`CHECKSCRIPT ` + literal(bad)); got != `NO "line 3, column 3: unknown command \"filein\""` {
		t.Errorf("CHECKSCRIPT error: %q", got)
	}
	if got := c.do(`PUTSCRIPT "broken" ` + literal(bad)); !strings.HasPrefix(got, `NO "line 3, column 3`) {
		t.Errorf("PUTSCRIPT of a broken script: %q", got)
	}
	if got := c.do(`CHECKSCRIPT ` + literal("fileinto \"x\";")); !strings.Contains(got, `needs require \"fileinto\"`) {
		t.Errorf("CHECKSCRIPT without require: %q", got)
	}
	if got := c.do(`CHECKSCRIPT ` + literal(script)); got != `OK "Script is valid"` {
		t.Errorf("CHECKSCRIPT ok: %q", got)
	}
	if got := c.do(`GETSCRIPT "broken"`); !strings.HasPrefix(got, "NO (NONEXISTENT)") {
		t.Errorf("the broken script was stored: %q", got)
	}
	if got := c.do(`SETACTIVE "nope"`); !strings.HasPrefix(got, "NO (NONEXISTENT)") {
		t.Errorf("SETACTIVE missing: %q", got)
	}
	if got := c.do(`SETACTIVE "rules"`); !strings.HasPrefix(got, "OK") {
		t.Fatalf("SETACTIVE: %q", got)
	}
	act, err := e.st.ActiveSieveScript(context.Background(), e.id)
	if err != nil || act.Name != "rules" || act.Content != script {
		t.Fatalf("active script in the store: %+v, %v", act, err)
	}
	if got := c.do(`PUTSCRIPT "other" {5}` + "\r\nkeep;"); !strings.HasPrefix(got, "OK") { // a synchronizing literal
		t.Fatalf("PUTSCRIPT other: %q", got)
	}
	c.send("LISTSCRIPTS")
	if got := strings.Join(c.response(), "|"); got != `"other"|"rules" ACTIVE|OK "Listscripts completed"` {
		t.Errorf("LISTSCRIPTS: %q", got)
	}
	c.send(`GETSCRIPT "rules"`)
	resp := c.response()
	if resp[0] != fmt.Sprintf("{%d}", len(script)) || !strings.HasPrefix(resp[len(resp)-1], "OK") {
		t.Errorf("GETSCRIPT: %q", resp)
	}
	if got := c.do(`DELETESCRIPT "rules"`); !strings.HasPrefix(got, "NO (ACTIVE)") {
		t.Errorf("DELETESCRIPT active: %q", got)
	}
	if got := c.do(`RENAMESCRIPT "other" "rules"`); !strings.HasPrefix(got, "NO (ALREADYEXISTS)") {
		t.Errorf("RENAMESCRIPT onto an existing name: %q", got)
	}
	if got := c.do(`RENAMESCRIPT "other" "spare"`); !strings.HasPrefix(got, "OK") {
		t.Errorf("RENAMESCRIPT: %q", got)
	}
	// Limits: the size and the number of scripts (RFC 5804 §2.5).
	if got := c.do(`HAVESPACE "big" 5000`); !strings.HasPrefix(got, "NO (QUOTA/MAXSIZE)") {
		t.Errorf("HAVESPACE too big: %q", got)
	}
	if got := c.do(`PUTSCRIPT "big" ` + literal(strings.Repeat("#", 2000))); !strings.HasPrefix(got, "NO (QUOTA/MAXSIZE)") {
		t.Errorf("PUTSCRIPT over the size limit: %q", got)
	}
	if got := c.do(`PUTSCRIPT "third" ` + literal("keep;")); !strings.HasPrefix(got, "OK") {
		t.Fatalf("third script: %q", got)
	}
	if got := c.do(`HAVESPACE "fourth" 10`); !strings.HasPrefix(got, "NO (QUOTA/MAXSCRIPTS)") {
		t.Errorf("HAVESPACE a fourth script: %q", got)
	}
	if got := c.do(`HAVESPACE "third" 10`); got != `OK "Putscript would succeed"` {
		t.Errorf("HAVESPACE to replace a script: %q", got)
	}
	if got := c.do(`SETACTIVE ""`); !strings.HasPrefix(got, "OK") {
		t.Errorf("SETACTIVE \"\": %q", got)
	}
	if got := c.do(`DELETESCRIPT "rules"`); !strings.HasPrefix(got, "OK") {
		t.Errorf("DELETESCRIPT inactive: %q", got)
	}
	if got := c.do(`NOOP "tag1"`); got != `OK (TAG "tag1") "Done"` {
		t.Errorf("NOOP: %q", got)
	}
	if got := c.do(`FROB`); !strings.HasPrefix(got, "NO") {
		t.Errorf("unknown command: %q", got)
	}
	if got := c.do(`PUTSCRIPT "unterminated`); !strings.HasPrefix(got, "NO") {
		t.Errorf("malformed string: %q", got)
	}
	if got := c.do(`LOGOUT`); !strings.HasPrefix(got, "OK") {
		t.Errorf("LOGOUT: %q", got)
	}
	// Bob sees none of alice's scripts.
	b := e.dial()
	b.login("bob@example.org")
	b.send("LISTSCRIPTS")
	if got := b.response(); len(got) != 1 {
		t.Errorf("bob's LISTSCRIPTS: %q", got)
	}
}

func TestAuthFailures(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial()
	wrong := base64.StdEncoding.EncodeToString([]byte("\x00alice@example.org\x00wrong"))
	if got := c.do(`AUTHENTICATE "PLAIN" "` + wrong + `"`); got != `NO "Authentication failed"` {
		t.Errorf("wrong password: %q", got)
	}
	// Without an initial response: an empty challenge, then the
	// response; "*" cancels.
	c.send(`AUTHENTICATE "PLAIN"`)
	if l, _ := c.r.ReadString('\n'); l != "\"\"\r\n" {
		t.Fatalf("challenge %q", l)
	}
	c.send(`"*"`)
	if got := c.response(); got[0] != `NO "Authentication cancelled"` {
		t.Errorf("cancel: %q", got)
	}
	c.send(`AUTHENTICATE "PLAIN"`)
	c.r.ReadString('\n')
	good := base64.StdEncoding.EncodeToString([]byte("\x00alice@example.org\x00" + testPassword))
	c.send(`"` + good + `"`)
	if got := c.response(); got[0] != `OK "Logged in"` {
		t.Errorf("login after a challenge: %q", got)
	}
	if got := c.do(`AUTHENTICATE "PLAIN" "x"`); !strings.HasPrefix(got, "NO") {
		t.Errorf("AUTHENTICATE twice: %q", got)
	}
}

// TestPlainOnlyOverTLSOrLoopback: a client that is not on loopback gets
// no SASL mechanisms and ENCRYPT-NEEDED until it has started TLS.
func TestPlainOnlyOverTLSOrLoopback(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial()
	// The session sees a loopback address; tested through the rule
	// itself for another address.
	s := &session{srv: &Server{cfg: Config{}}, remoteIP: "192.0.2.7"}
	if s.authAllowed() {
		t.Error("plain login allowed from 192.0.2.7 without TLS")
	}
	s.tls = true
	if !s.authAllowed() {
		t.Error("plain login refused over TLS")
	}
	// STARTTLS, then the capabilities again.
	if got := c.do("STARTTLS"); !strings.HasPrefix(got, "OK") {
		t.Fatalf("STARTTLS: %q", got)
	}
	tc := tls.Client(c.conn, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	c.conn, c.r = tc, bufio.NewReader(tc)
	caps := strings.Join(c.response(), "\n")
	if !strings.Contains(caps, `"SASL" "PLAIN SCRAM-SHA-256"`) || strings.Contains(caps, `"STARTTLS"`) {
		t.Errorf("capabilities after STARTTLS:\n%s", caps)
	}
	c.login("alice@example.org")
}

func TestWireQuoting(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`a"b\c`, `"a\"b\\c"`},
		{"two\r\nlines", "{10}\r\ntwo\r\nlines"},
	} {
		if got := quote(c.in); got != c.want {
			t.Errorf("quote(%q) = %q; want %q", c.in, got, c.want)
		}
	}
	for _, s := range []string{`"unterminated`, `"bad \escape"`} {
		if _, _, err := unquote(s); err == nil {
			t.Errorf("unquote(%q) accepted", s)
		}
	}
}

// TestSCRAM logs in with SCRAM-SHA-256 (RFC 7677) driven by xdg-go/scram's
// client: challenges as strings, the server's final message in the OK's
// SASL code (RFC 5804 §2.1), which the client verifies.
func TestSCRAM(t *testing.T) {
	e := newEnv(t, Config{})
	k, err := password.SCRAMKeys(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetSCRAM(context.Background(), "alice@example.org", k); err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"wrong password", testPassword} {
		c := e.dial()
		cl, err := scram.SHA256.NewClient("alice@example.org", pw, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := cl.NewConversation()
		first, _ := conv.Step("")
		c.send(`AUTHENTICATE "SCRAM-SHA-256" "` + base64.StdEncoding.EncodeToString([]byte(first)) + `"`)
		l, _ := c.r.ReadString('\n')
		challenge, err := base64.StdEncoding.DecodeString(strings.Trim(strings.TrimSpace(l), `"`))
		if err != nil {
			t.Fatalf("server-first %q: %v", l, err)
		}
		final, err := conv.Step(string(challenge))
		if err != nil {
			t.Fatal(err)
		}
		c.send(`"` + base64.StdEncoding.EncodeToString([]byte(final)) + `"`)
		got := c.response()[0]
		if pw != testPassword {
			if got != `NO "Authentication failed"` {
				t.Errorf("wrong password: %q", got)
			}
			continue
		}
		const prefix = `OK (SASL "`
		if !strings.HasPrefix(got, prefix) {
			t.Fatalf("SCRAM login: %q", got)
		}
		sf, _ := base64.StdEncoding.DecodeString(strings.SplitN(got[len(prefix):], `"`, 2)[0])
		if _, err := conv.Step(string(sf)); err != nil || !conv.Valid() {
			t.Errorf("the server's signature does not verify: %v", err)
		}
		if got := c.do("LISTSCRIPTS"); !strings.HasPrefix(got, "OK") {
			t.Errorf("LISTSCRIPTS after SCRAM: %q", got)
		}
	}
}
