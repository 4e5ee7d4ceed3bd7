package imapd

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
)

func testTLSConfig(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

func TestLoginDisabledWithoutTLS(t *testing.T) {
	e := newTestEnv(t, Config{TLS: testTLSConfig(t)})
	r := e.raw()
	res := r.cmd("c", "CAPABILITY")
	if !strings.Contains(res[0], "LOGINDISABLED") || !strings.Contains(res[0], "STARTTLS") || strings.Contains(res[0], "AUTH=PLAIN") {
		t.Fatalf("capabilities without TLS: %q", res)
	}
	if l := last(r.cmd("l", "LOGIN alice@example.org secret")); !strings.HasPrefix(l, "l NO [PRIVACYREQUIRED]") {
		t.Fatalf("LOGIN without TLS: %q", l)
	}
	// STARTTLS, then LOGIN works.
	if l := last(r.cmd("s", "STARTTLS")); l != "s OK Begin TLS negotiation now" {
		t.Fatalf("STARTTLS: %q", l)
	}
	tc := tls.Client(r.c, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	r.c, r.br = tc, bufio.NewReader(tc)
	res = r.cmd("c2", "CAPABILITY")
	if strings.Contains(res[0], "STARTTLS") || strings.Contains(res[0], "LOGINDISABLED") || !strings.Contains(res[0], "AUTH=PLAIN") {
		t.Fatalf("capabilities after TLS: %q", res)
	}
	r.login()
}

func TestStartTLSClient(t *testing.T) {
	e := newTestEnv(t, Config{TLS: testTLSConfig(t)})
	c, err := imapclient.DialStartTLS(e.addr, &imapclient.Options{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login("alice@example.org", testPassword).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestAuthenticatePlain(t *testing.T) {
	e := newTestEnv(t, Config{})
	ir := base64.StdEncoding.EncodeToString([]byte("\x00alice@example.org\x00" + testPassword))
	r := e.raw()
	if l := last(r.cmd("a", "AUTHENTICATE PLAIN "+ir)); !strings.HasPrefix(l, "a OK [CAPABILITY ") {
		t.Fatalf("SASL-IR: %q", l)
	}
	r2 := e.raw()
	r2.send("b AUTHENTICATE PLAIN\r\n")
	if l := r2.line(); l != "+ " {
		t.Fatalf("continuation: %q", l)
	}
	r2.send(ir + "\r\n")
	if l := r2.line(); !strings.HasPrefix(l, "b OK") {
		t.Fatalf("AUTHENTICATE: %q", l)
	}
	r3 := e.raw()
	r3.send("c AUTHENTICATE PLAIN\r\n")
	r3.line()
	r3.send("*\r\n")
	if l := r3.line(); !strings.HasPrefix(l, "c BAD") {
		t.Fatalf("cancel: %q", l)
	}
	wrong := base64.StdEncoding.EncodeToString([]byte("bob@example.org\x00alice@example.org\x00" + testPassword))
	if l := last(r3.cmd("d", "AUTHENTICATE PLAIN "+wrong)); !strings.HasPrefix(l, "d NO") {
		t.Fatalf("authzid of another user: %q", l)
	}
}

func TestLoginFailures(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	for i := 0; i < maxAuthFailures; i++ {
		if l := last(r.cmd("l", "LOGIN alice@example.org wrong")); !strings.HasPrefix(l, "l NO [AUTHENTICATIONFAILED]") {
			t.Fatalf("failed login: %q", l)
		}
	}
	if l := r.line(); !strings.HasPrefix(l, "* BYE") {
		t.Fatalf("expected BYE after %d failures, got %q", maxAuthFailures, l)
	}
}

func TestIDEnableNamespaceLogout(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	if res := r.cmd("i", `ID ("name" "test")`); res[0] != `* ID ("name" "pimail" "vendor" "pimail")` {
		t.Fatalf("ID: %q", res)
	}
	r.login()
	if res := r.cmd("e", "ENABLE IMAP4rev2 UTF8=ACCEPT X-UNKNOWN"); res[0] != "* ENABLED IMAP4rev2 UTF8=ACCEPT" {
		t.Fatalf("ENABLE: %q", res)
	}
	if res := r.cmd("n", "NAMESPACE"); res[0] != `* NAMESPACE (("" "/")) NIL NIL` {
		t.Fatalf("NAMESPACE: %q", res)
	}
	if res := r.cmd("o", "LOGOUT"); res[0] != "* BYE Logging out" || res[1] != "o OK LOGOUT completed" {
		t.Fatalf("LOGOUT: %q", res)
	}
}

func TestLoopbackAuthWithoutTLS(t *testing.T) {
	// The test connects from 127.0.0.1: with AllowLoopbackAuth that is
	// enough to log in without TLS; without it, see TestLoginDisabledWithoutTLS.
	e := newTestEnv(t, Config{TLS: testTLSConfig(t), AllowLoopbackAuth: true})
	r := e.raw()
	res := r.cmd("c", "CAPABILITY")
	if strings.Contains(res[0], "LOGINDISABLED") || !strings.Contains(res[0], "AUTH=PLAIN") {
		t.Fatalf("capabilities on loopback: %q", res)
	}
	r.login()
}
