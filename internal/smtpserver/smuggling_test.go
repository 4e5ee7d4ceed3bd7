package smtpserver

import (
	"fmt"
	"strings"
	"testing"
)

// SMTP smuggling: a message whose data holds an end-of-data sequence
// that another server would take for the end, followed by a forged
// transaction. Every variant must be refused as a whole with 5xx, nothing
// stored, and the forged commands never run. The issue 28 cases are
// among them: "<CRLF>.<CR><CR><LF>" (Postfix strips the CRs and ends
// there) and "<CRLF>.<CR>x" (a server ending lines at CR sees ".").
func TestSmugglingVariantsRejected(t *testing.T) {
	variants := map[string]string{
		"LF.LF":      "\n.\n",
		"LF.CRLF":    "\n.\r\n",
		"CRLF.LF":    "\r\n.\n",
		"CR.CR":      "\r.\r",
		"CR.CRLF":    "\r.\r\n",
		"CR.LF":      "\r.\n",
		"CRCRLF":     "\r\r\n.\r\r\n",
		"CRLF.CRCR":  "\r\n.\r\r\n",
		"CRLF.CRx":   "\r\n.\rX",
		"LF.CR":      "\n.\r",
		"LF.CRCRLF":  "\n.\r\r\n",
		"CRLF.CRLFx": "\r\n.\r\r",
	}
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	for name, seq := range variants {
		c.expect("MAIL FROM:<sender@remote.test>", 250)
		c.expect("RCPT TO:<alice@example.com>", 250)
		c.expect("DATA", 354)
		c.send("From: sender@remote.test\r\nSubject: x\r\n\r\nhello" + seq +
			"MAIL FROM:<evil@remote.test>\r\nRCPT TO:<bob@example.com>\r\nDATA\r\n" +
			"From: ceo@example.com\r\nSubject: smuggled\r\n\r\nevil\r\n.\r\n")
		code, msg := c.reply()
		if code != 554 || !strings.HasPrefix(msg, "5.5.2 ") {
			t.Errorf("%s: reply %d %s, want 554 5.5.2", name, code, msg)
		}
		// The next reply must answer our NOOP, not a smuggled command.
		if code, msg := c.cmd("NOOP"); code != 250 || !strings.Contains(msg, "nothing") {
			t.Fatalf("%s: after the message, NOOP got %d %s: the stream is out of step", name, code, msg)
		}
	}
	if n := e.messages(t); n != 0 {
		t.Fatalf("%d messages stored, want 0", n)
	}
}

// Bare CR and LF that no server reads as the end of the data are kept as
// Postfix 3.9 keeps them: a bare LF becomes CR LF, CRs right before an LF
// are dropped, a CR inside a line stays. The text after them is message
// text, never commands.
func TestBareLineEndingsNormalized(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	body := "From: sender@remote.test\nSubject: x\r\n\r\nhello\nMAIL FROM:<evil@remote.test>\r\n" +
		"a\rb\r\nlast\r\r\n.."
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, body); code != 250 {
		t.Fatalf("message with bare line endings: %d %s", code, msg)
	}
	want := "From: sender@remote.test\r\nSubject: x\r\n\r\nhello\r\nMAIL FROM:<evil@remote.test>\r\n" +
		"a\rb\r\nlast\r\n.\r\n"
	got := e.inbox(t, "alice@example.com")
	if len(got) != 1 || !strings.HasSuffix(got[0], "\r\n"+want) {
		t.Fatalf("stored %q", got)
	}
	c.expect("NOOP", 250)
	if got := e.inbox(t, "bob@example.com"); len(got) != 0 {
		t.Fatalf("bob got %d messages", len(got))
	}
}

// Dot-stuffed lines (RFC 5321 §4.5.2) and a message ending with a dot line
// are transparent, and the session is still in step afterwards.
func TestDotTransparency(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	body := "Subject: dots\r\n\r\n..\r\n..leading\r\nmid.dle\r\n.."
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, body); code != 250 {
		t.Fatalf("dot-stuffed message: %d %s", code, msg)
	}
	got := e.inbox(t, "alice@example.com")
	if len(got) != 1 || !strings.HasSuffix(got[0], "\r\n\r\n.\r\n.leading\r\nmid.dle\r\n.\r\n") {
		t.Fatalf("stored: %q", got)
	}
	c.expect("NOOP", 250)
}

// A message several times the buffer that a transaction without SIZE=
// starts with arrives whole.
func TestMessageWithoutSizeGrowsBuffer(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	var b strings.Builder
	b.WriteString("Subject: big\r\n\r\n")
	for i := 0; b.Len() < 5*noSizeHint; i++ {
		fmt.Fprintf(&b, "line %06d of a message that has no SIZE parameter\r\n", i)
	}
	body := b.String() + "last line"
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, body); code != 250 {
		t.Fatalf("large message without SIZE: %d %s", code, msg)
	}
	got := e.inbox(t, "alice@example.com")
	if len(got) != 1 || !strings.HasSuffix(got[0], "\r\n"+body+"\r\n") {
		t.Fatalf("stored %d messages; the message is not intact", len(got))
	}
}
