package blackbox

import (
	"bufio"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

// upgrade runs a TLS handshake over c (the self-signed test certificate
// is not checked: the point is what the server does with plaintext sent
// before the handshake, CVE-2011-0411 and its IMAP/POP3 kin).
func upgrade(t *testing.T, c net.Conn) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "test.local"})
	_ = tc.SetDeadline(time.Now().Add(ioTimeout))
	if err := tc.Handshake(); err != nil {
		// A server that answered the injected command in plaintext
		// breaks the handshake; that is an injection too.
		t.Fatalf("TLS handshake after STARTTLS: %v", err)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, bufio.NewReader(tc)
}

// TestAttackSTARTTLSInjection sends a command in the same packet as
// STARTTLS/STLS. RFC 3207 §4.2, RFC 9051 §6.2.1 and RFC 2595 §4: the
// server must discard anything it read before the TLS handshake, so the
// first answer over TLS is to the first command sent over TLS.
func TestAttackSTARTTLSInjection(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	srv.AddAccounts("tlsvictim")
	l := withListeners(t, "pop3")
	srv.StartWith(l)

	t.Run("smtp", func(t *testing.T) {
		s := dialSMTP(t, srv.SMTP)
		if _, err := s.c.Write([]byte("STARTTLS\r\nXINJECTED\r\n")); err != nil {
			t.Fatal(err)
		}
		if code, text, err := s.reply(); err != nil || code != 220 {
			t.Fatalf("STARTTLS: %d %q %v", code, text, err)
		}
		tc, r := upgrade(t, s.c)
		s.c, s.r = tc, r
		// An injected XINJECTED would be answered 500 before this.
		code, text, err := s.cmd("NOOP")
		if err != nil || code != 250 {
			t.Errorf("first reply over TLS: %d %q %v: the injected plaintext command was executed", code, text, err)
		}
		s.expect("EHLO client.example", 250)
		s.expect("QUIT", 221)
	})

	t.Run("imap", func(t *testing.T) {
		ic := dialIMAP(t, srv.IMAP)
		if err := ic.write("a STARTTLS\r\nb XINJECTED\r\n"); err != nil {
			t.Fatal(err)
		}
		st, _, err := ic.tagged("a")
		if err == nil && (strings.HasPrefix(st, "BAD") || strings.HasPrefix(st, "NO")) {
			// Refusing STARTTLS when data follows it is a defence too:
			// no TLS boundary is crossed, the session stays plaintext.
			t.Logf("STARTTLS with pipelined data refused: %q", st)
			return
		}
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("STARTTLS: %q %v", st, err)
		}
		tc, r := upgrade(t, ic.c)
		ic.c, ic.r = tc, r
		if err := ic.write("c NOOP\r\n"); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			line, err := ic.line()
			if err != nil {
				t.Fatalf("over TLS: %v", err)
			}
			if strings.HasPrefix(line, "b ") {
				t.Fatalf("the injected command got an answer over TLS: %q", line)
			}
			if strings.HasPrefix(line, "c ") {
				if !strings.HasPrefix(line, "c OK") {
					t.Errorf("NOOP over TLS: %q", line)
				}
				return
			}
		}
		t.Fatal("no answer to NOOP over TLS")
	})

	t.Run("pop3", func(t *testing.T) {
		p := dialPOP3(t, l.POP3)
		if _, err := p.c.Write([]byte("STLS\r\nXINJECTED\r\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := p.line(); err != nil || !strings.HasPrefix(line, "+OK") {
			t.Fatalf("STLS: %q %v", line, err)
		}
		tc, r := upgrade(t, p.c)
		p.c, p.r = tc, r
		// CAPA answers +OK; the injected XINJECTED would be -ERR first.
		if line, err := p.cmd("CAPA"); err != nil || !strings.HasPrefix(line, "+OK") {
			t.Errorf("first answer over TLS: %q %v: the injected plaintext command was executed", line, err)
		}
	})
}
