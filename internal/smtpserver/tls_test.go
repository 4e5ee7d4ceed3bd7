package smtpserver

import (
	"crypto/tls"
	"strings"
	"testing"
)

// CVE-2011-0411 class: commands pipelined after STARTTLS in the plaintext
// phase must be discarded, never run inside the TLS session.
func TestStartTLSDiscardsPipelinedPlaintext(t *testing.T) {
	srvTLS, cliTLS := selfSigned(t)
	e := newEnv(t, Config{TLS: srvTLS})
	c := dial(t, e.addr)
	if msg := c.expect("EHLO client.test", 250); !hasLine(msg, "STARTTLS") {
		t.Fatalf("STARTTLS not offered:\n%s", msg)
	}
	// The injected RSET, if run after the handshake, would answer before
	// our NOOP; the injected MAIL would make the later MAIL fail with 503.
	c.send("STARTTLS\r\nRSET\r\nMAIL FROM:<evil@remote.test>\r\n")
	c.expectReply(220, "STARTTLS")
	tc := tls.Client(c.conn, cliTLS)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	c.setConn(tc)
	if code, msg := c.cmd("NOOP"); code != 250 || !strings.Contains(msg, "nothing") {
		t.Fatalf("first reply inside TLS is %d %s: plaintext commands leaked into the TLS session", code, msg)
	}
	// RFC 3207 §4.2: the client must say EHLO again; the state is reset.
	c.expect("MAIL FROM:<sender@remote.test>", 503)
	msg := c.expect("EHLO client.test", 250)
	if hasLine(msg, "STARTTLS") {
		t.Fatalf("STARTTLS offered again inside TLS:\n%s", msg)
	}
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, simpleMessage); code != 250 {
		t.Fatalf("delivery over TLS: %d %s", code, msg)
	}
	got := e.inbox(t, "alice@example.com")
	if len(got) != 1 || !strings.Contains(got[0], " with ESMTPS id ") || !strings.Contains(got[0], "(TLS1.3 TLS_") {
		t.Fatalf("TLS message trace: %q", got)
	}
}
