package pop3d

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"net"
	"strings"
	"testing"
	"time"

	"pimail/internal/auth"
	"pimail/internal/password"
)

func plain(authz, user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(authz + "\x00" + user + "\x00" + pass))
}

func TestCapa(t *testing.T) {
	tlsConf, _ := selfSigned(t)
	e := newTestEnv(t, Config{TLS: tlsConf}, nil)
	c := e.dial()
	caps := c.multiLines("CAPA")
	for _, want := range []string{"TOP", "UIDL", "USER", "RESP-CODES", "AUTH-RESP-CODE", "PIPELINING", "SASL PLAIN", "STLS", "IMPLEMENTATION pimail"} {
		if !contains(caps, want) {
			t.Errorf("CAPA %q lacks %q", caps, want)
		}
	}
	c.login("alice@example.org")
	caps = c.multiLines("CAPA")
	for _, gone := range []string{"USER", "SASL PLAIN", "STLS"} {
		if contains(caps, gone) {
			t.Errorf("CAPA after login %q still has %q", caps, gone)
		}
	}
	if !contains(caps, "UIDL") || !contains(caps, "TOP") {
		t.Errorf("CAPA after login = %q", caps)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func TestUserPass(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	c := e.dial()
	if r := c.cmd("PASS " + testPassword); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("PASS without USER = %q", r)
	}
	c.ok("USER alice@example.org")
	if r := c.cmd("PASS wrong"); !strings.HasPrefix(r, "-ERR [AUTH]") {
		t.Errorf("wrong PASS = %q, want -ERR [AUTH]", r)
	}
	// USER is forgotten after a failed PASS.
	if r := c.cmd("PASS " + testPassword); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("PASS after failed PASS = %q", r)
	}
	if r := c.cmd("USER"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("USER without name = %q", r)
	}
	// The password is the rest of the line, spaces included.
	c.login("ALICE@example.org")
	if r := c.cmd("USER bob@example.org"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("USER in TRANSACTION state = %q", r)
	}
	c.ok("STAT")
}

func TestAuthFailuresCloseSession(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	c := e.dial()
	for i := 0; i < maxAuthFailures-1; i++ {
		c.ok("USER alice@example.org")
		if r := c.cmd("PASS nope"); !strings.HasPrefix(r, "-ERR [AUTH]") {
			t.Fatalf("attempt %d: %q", i, r)
		}
	}
	c.ok("USER alice@example.org")
	c.send("PASS nope\r\n")
	c.line() // -ERR [AUTH] authentication failed
	if r := c.line(); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("after the last failure: %q", r)
	}
	c.closed()
}

func TestAuthPlain(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	c := e.dial()
	lines := c.multiLines("AUTH")
	if len(lines) != 1 || lines[0] != "PLAIN" {
		t.Errorf("AUTH mechanism list = %q", lines)
	}
	if r := c.cmd("AUTH CRAM-MD5"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("AUTH CRAM-MD5 = %q", r)
	}
	if r := c.cmd("AUTH PLAIN !!!"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("bad base64 = %q", r)
	}
	if r := c.cmd("AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("no nul"))); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("malformed PLAIN = %q", r)
	}
	if r := c.cmd("AUTH PLAIN " + plain("bob@example.org", "alice@example.org", testPassword)); !strings.HasPrefix(r, "-ERR [AUTH]") {
		t.Errorf("authzid of another user = %q", r)
	}
	// Continuation, cancelled with "*" (RFC 5034 §4).
	if r := c.cmd("AUTH PLAIN"); r != "+ " {
		t.Fatalf("AUTH PLAIN challenge = %q", r)
	}
	if r := c.cmd("*"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("cancelled AUTH = %q", r)
	}
	// Continuation with a wrong password.
	c.cmd("AUTH PLAIN")
	if r := c.cmd(plain("", "alice@example.org", "bad")); !strings.HasPrefix(r, "-ERR [AUTH]") {
		t.Errorf("AUTH PLAIN with a wrong password = %q", r)
	}
	// Continuation that succeeds.
	c.cmd("AUTH PLAIN")
	if r := c.cmd(plain("alice@example.org", "alice@example.org", testPassword)); !strings.HasPrefix(r, "+OK") {
		t.Fatalf("AUTH PLAIN = %q", r)
	}
	c.ok("STAT")

	// Initial response.
	c2 := e.dial()
	c2.ok("AUTH plain " + plain("", "bob@example.org", testPassword))
	if r := c2.ok("STAT"); r != "+OK 0 0" {
		t.Errorf("bob STAT = %q", r)
	}
	// "=" is an empty initial response, which PLAIN rejects.
	c3 := e.dial()
	if r := c3.cmd("AUTH PLAIN ="); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("empty initial response = %q", r)
	}
}

func TestPlainAuthAllowedPolicy(t *testing.T) {
	for _, tc := range []struct {
		secure, insecure bool
		ip               string
		want             bool
	}{
		{false, false, "127.0.0.1", true},
		{false, false, "127.8.9.10", true},
		{false, false, "::1", true},
		{false, false, "::ffff:127.0.0.1", true},
		{false, false, "192.0.2.7", false},
		{false, false, "2001:db8::1", false},
		{false, false, "", false},
		{false, false, "not-an-ip", false},
		{true, false, "192.0.2.7", true},
		{false, true, "192.0.2.7", true},
	} {
		if got := plainAuthAllowed(tc.secure, tc.insecure, tc.ip); got != tc.want {
			t.Errorf("plainAuthAllowed(tls=%v, insecure=%v, %q) = %v, want %v", tc.secure, tc.insecure, tc.ip, got, tc.want)
		}
	}
}

func TestPlainLoginRefusedFromNetworkWithoutTLS(t *testing.T) {
	e := newTestEnv(t, Config{}, fromRemote)
	c := e.dial()
	caps := c.multiLines("CAPA")
	if contains(caps, "USER") || contains(caps, "SASL PLAIN") {
		t.Errorf("CAPA offers plain-text login without TLS: %q", caps)
	}
	for _, cmd := range []string{"USER alice@example.org", "PASS " + testPassword, "AUTH PLAIN " + plain("", "alice@example.org", testPassword)} {
		if r := c.cmd(cmd); !strings.HasPrefix(r, "-ERR [AUTH]") || !strings.Contains(r, "TLS") {
			t.Errorf("%s from the network without TLS = %q", strings.Fields(cmd)[0], r)
		}
	}
	if r := c.cmd("STAT"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("STAT without login = %q", r)
	}

	// AllowInsecureAuth lifts the rule.
	e2 := newTestEnv(t, Config{AllowInsecureAuth: true}, fromRemote)
	c2 := e2.dial()
	c2.login("alice@example.org")
}

func TestSTLS(t *testing.T) {
	tlsConf, pool := selfSigned(t)
	e := newTestEnv(t, Config{TLS: tlsConf}, fromRemote)
	c := e.dial()
	if r := c.cmd("USER alice@example.org"); !strings.HasPrefix(r, "-ERR [AUTH]") {
		t.Fatalf("USER before STLS from the network = %q", r)
	}
	if r := c.cmd("STLS x"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("STLS with an argument = %q", r)
	}
	// A command pipelined after STLS must be discarded (RFC 2595 §4).
	c.send("STLS\r\nUSER alice@example.org\r\n")
	if r := c.line(); !strings.HasPrefix(r, "+OK") {
		t.Fatalf("STLS = %q", r)
	}
	if c.br.Buffered() != 0 {
		t.Fatal("data after the STLS response")
	}
	tc := tls.Client(c.c, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	c = &conn{t: t, c: tc, br: c.br}
	c.br.Reset(tc)
	if r := c.cmd("PASS " + testPassword); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("PASS after a USER pipelined before the handshake = %q, want -ERR", r)
	}
	caps := c.multiLines("CAPA")
	if contains(caps, "STLS") || !contains(caps, "USER") || !contains(caps, "SASL PLAIN") {
		t.Errorf("CAPA over TLS = %q", caps)
	}
	if r := c.cmd("STLS"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("second STLS = %q", r)
	}
	c.login("alice@example.org")
	c.ok("STAT")
}

func TestSTLSUnavailable(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	c := e.dial()
	if contains(c.multiLines("CAPA"), "STLS") {
		t.Error("CAPA offers STLS without a certificate")
	}
	if r := c.cmd("STLS"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("STLS without TLS config = %q", r)
	}
	c.ok("CAPA")
}

func TestImplicitTLS(t *testing.T) {
	tlsConf, pool := selfSigned(t)
	st, acct := openStore(t)
	e := startServer(t, st, acct, Config{TLS: tlsConf}, testAuth{st}, func(ln net.Listener) net.Listener {
		return tls.NewListener(fromRemote(ln), tlsConf)
	})
	e.deliver(msg1)
	raw, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c := e.wrapConn(raw)
	if contains(c.multiLines("CAPA"), "STLS") {
		t.Error("CAPA offers STLS on an implicit TLS connection")
	}
	c.login("alice@example.org")
	c.ok("RETR 1")
	if got := c.multi(); got != msg1 {
		t.Errorf("RETR over TLS = %q", got)
	}
}

// TestRealAuthenticator logs in through internal/auth with an argon2id
// hash in the store.
func TestRealAuthenticator(t *testing.T) {
	st, acct := openStore(t)
	hash, err := password.Hash(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPassword(context.Background(), acct.Address, hash); err != nil {
		t.Fatal(err)
	}
	e := startServer(t, st, acct, Config{}, auth.New(st, testLogger()), nil)
	e.deliver(msg1)
	c := e.dial()
	c.ok("USER alice@example.org")
	if r := c.cmd("PASS wrong"); !strings.HasPrefix(r, "-ERR [AUTH]") {
		t.Errorf("wrong password = %q", r)
	}
	c.ok("USER nobody@example.org")
	if r := c.cmd("PASS " + testPassword); !strings.HasPrefix(r, "-ERR [AUTH]") {
		t.Errorf("unknown user = %q", r)
	}
	c.login("alice@example.org")
	if r := c.ok("STAT"); !strings.HasPrefix(r, "+OK 1 ") {
		t.Errorf("STAT = %q", r)
	}
	c.ok("QUIT")
	c.closed()
	c2 := e.dial()
	c2.ok("AUTH PLAIN " + plain("", "Alice@Example.org", testPassword))
}
