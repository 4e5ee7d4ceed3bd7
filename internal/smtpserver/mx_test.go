package smtpserver

import (
	"context"
	"errors"
	"net"
	"net/smtp"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

func TestEHLOExtensions(t *testing.T) {
	e := newEnv(t, Config{MaxMessageBytes: 1 << 20})
	c := dial(t, e.addr)
	msg := c.expect("EHLO client.test", 250)
	for _, ext := range []string{"PIPELINING", "8BITMIME", "ENHANCEDSTATUSCODES", "CHUNKING", "SMTPUTF8", "SIZE 1048576"} {
		if !hasLine(msg, ext) {
			t.Errorf("EHLO reply lacks %s:\n%s", ext, msg)
		}
	}
	for _, ext := range []string{"AUTH", "STARTTLS"} {
		if hasLine(msg, ext) {
			t.Errorf("EHLO reply offers %s on a plain MX without TLS:\n%s", ext, msg)
		}
	}
	c.expect("STARTTLS", 502)
	if code, _ := c.cmd("AUTH PLAIN AGFsaWNlAHNlY3JldA=="); code < 500 {
		t.Fatalf("AUTH on the MX got %d, want a 5xx refusal", code)
	}
	c.expect("QUIT", 221)
}

// Three local recipients plus an alias that overlaps them: one blob, one
// row per account, and the trace fields on top.
func TestDeliveryOneBlob(t *testing.T) {
	e := newEnv(t, Config{})
	cl, err := smtp.Dial(e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Mail("sender@remote.test"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"alice@example.com", "bob@example.com", "carol@example.com", "team@example.com"} {
		if err := cl.Rcpt(r); err != nil {
			t.Fatalf("RCPT %s: %v", r, err)
		}
	}
	w, err := cl.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(simpleMessage)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("end of data: %v", err)
	}
	if err := cl.Quit(); err != nil {
		t.Fatal(err)
	}

	stats, err := e.st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Blobs != 1 || stats.Messages != 3 {
		t.Fatalf("stored %d blobs, %d rows; want 1 blob, 3 rows", stats.Blobs, stats.Messages)
	}
	got := e.inbox(t, "bob@example.com")
	if len(got) != 1 {
		t.Fatalf("bob has %d messages", len(got))
	}
	re := regexp.MustCompile(`^Return-Path: <sender@remote\.test>\r\n` +
		`Received: from client\.test \(\[127\.0\.0\.1\]\)\r\n` +
		`\tby mx\.example\.com with (ESMTP|UTF8SMTP) id [0-9a-v]{16};\r\n` +
		`\t[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}\r\n` +
		regexp.QuoteMeta(simpleMessage) + `$`)
	if !re.MatchString(got[0]) {
		t.Fatalf("stored message:\n%q", got[0])
	}
}

func TestUnknownUserSessionContinues(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	if msg := c.expect("RCPT TO:<nobody@example.com>", 550); !strings.HasPrefix(msg, "5.1.1 ") {
		t.Fatalf("unknown user reply %q, want 5.1.1", msg)
	}
	c.expect("RCPT TO:<alice@example.com>", 250)
	c.expect("RCPT TO:<ghost@example.com>", 550)
	c.expect("DATA", 354)
	c.send(simpleMessage + ".\r\n")
	c.expectReply(250, "end of data")
	// The session goes on after the transaction, too.
	c.expect("NOOP", 250)
	if n := e.messages(t); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
	if got := e.inbox(t, "alice@example.com"); len(got) != 1 || !strings.Contains(got[0], "\tfor <alice@example.com>;") {
		t.Fatalf("alice's message: %q", got)
	}
}

func TestRelayDenied(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	for _, rcpt := range []string{"victim@remote.test", "alice@example.com.evil.test", "alice@[127.0.0.1]", `"alice@example.com"@remote.test`} {
		code, msg := c.cmd("RCPT TO:<" + rcpt + ">")
		if code != 550 || !strings.HasPrefix(msg, "5.7.1 ") {
			t.Errorf("RCPT %s: %d %s, want 550 5.7.1", rcpt, code, msg)
		}
	}
	c.expect("DATA", 554) // no valid recipient, no data phase (RFC 5321 §3.3)
}

func TestCatchAllAndSubaddress(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	if code, msg := c.transaction("sender@remote.test", []string{"anything@Example.ORG"}, simpleMessage); code != 250 {
		t.Fatalf("catch-all: %d %s", code, msg)
	}
	if code, msg := c.transaction("sender@remote.test", []string{"Alice+Lists@example.com"}, simpleMessage); code != 250 {
		t.Fatalf("subaddress: %d %s", code, msg)
	}
	carol := e.inbox(t, "carol@example.com")
	if len(carol) != 1 || !strings.Contains(carol[0], "for <anything@Example.ORG>") {
		t.Fatalf("catch-all copy: %q", carol)
	}
	alice := e.inbox(t, "alice@example.com")
	if len(alice) != 1 || !strings.Contains(alice[0], "for <Alice+Lists@example.com>") {
		t.Fatalf("subaddressed copy: %q", alice)
	}
}

func TestOversize(t *testing.T) {
	const limit = 10 << 10
	e := newEnv(t, Config{MaxMessageBytes: limit})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	// Declared size: refused up front (RFC 1870 §6.2).
	if msg := c.expect("MAIL FROM:<sender@remote.test> SIZE=20000", 552); !strings.HasPrefix(msg, "5.3.4 ") {
		t.Fatalf("SIZE reply %q", msg)
	}
	// Undeclared: refused after the data, nothing stored.
	big := simpleMessage + strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\r\n", 2*limit/64)
	code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, big)
	if code != 552 || !strings.HasPrefix(msg, "5.3.4 ") {
		t.Fatalf("oversized DATA: %d %s", code, msg)
	}
	c.expect("NOOP", 250)
	// BDAT chunks over the limit.
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:<alice@example.com>", 250)
	c.send("BDAT 20000 LAST\r\n" + strings.Repeat("x", 19998) + "\r\n")
	if code, msg := c.reply(); code != 552 {
		t.Fatalf("oversized BDAT: %d %s", code, msg)
	}
	c.expect("NOOP", 250)
	if n := e.messages(t); n != 0 {
		t.Fatalf("%d messages stored, want 0", n)
	}
	// A message under the limit still goes through on the same session.
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, simpleMessage); code != 250 {
		t.Fatalf("small message: %d %s", code, msg)
	}
}

func TestBDAT(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:<bob@example.com>", 250)
	part1, part2 := simpleMessage[:30], simpleMessage[30:]+".leading dot kept\r\n"
	c.send("BDAT " + itoa(len(part1)) + "\r\n" + part1)
	c.expectReply(250, "first chunk")
	c.send("BDAT " + itoa(len(part2)) + " LAST\r\n" + part2)
	c.expectReply(250, "last chunk")
	got := e.inbox(t, "bob@example.com")
	if len(got) != 1 || !strings.HasSuffix(got[0], "\r\n"+simpleMessage+".leading dot kept\r\n") {
		t.Fatalf("BDAT message: %q", got)
	}
	// BDAT data is framed like DATA's, less the dots: a dot line
	// between bare line breaks is refused, a bare LF becomes CR LF.
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:<bob@example.com>", 250)
	bad := "Subject: x\r\n\r\nline\n.\nMAIL FROM:<evil@remote.test>\r\n"
	c.send("BDAT " + itoa(len(bad)) + " LAST\r\n" + bad)
	if code, msg := c.reply(); code != 554 || !strings.HasPrefix(msg, "5.5.2 ") {
		t.Fatalf("dot line between bare LFs in BDAT: %d %s", code, msg)
	}
	c.expect("NOOP", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:<bob@example.com>", 250)
	lf := "Subject: x\r\n\r\nline\nnext\r\n"
	c.send("BDAT " + itoa(len(lf)) + " LAST\r\n" + lf)
	c.expectReply(250, "bare LF in BDAT")
	if got := e.inbox(t, "bob@example.com"); len(got) != 2 || !strings.HasSuffix(got[1], "\r\n\r\nline\r\nnext\r\n") {
		t.Fatalf("stored %d messages; the last %q", len(got), got[len(got)-1])
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// RFC 2920: commands sent in one write get their replies in order.
func TestPipelining(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.send("MAIL FROM:<sender@remote.test>\r\nRCPT TO:<alice@example.com>\r\nRCPT TO:<nobody@example.com>\r\nRCPT TO:<bob@example.com>\r\nDATA\r\n")
	for i, want := range []int{250, 250, 550, 250, 354} {
		c.expectReply(want, "pipelined reply "+itoa(i))
	}
	c.send(simpleMessage + ".\r\nMAIL FROM:<>\r\nRCPT TO:<carol@example.com>\r\nDATA\r\n")
	for i, want := range []int{250, 250, 250, 354} {
		c.expectReply(want, "second group reply "+itoa(i))
	}
	c.send(simpleMessage + ".\r\nQUIT\r\n")
	c.expectReply(250, "second message")
	c.expectReply(221, "QUIT")
	if n := e.messages(t); n != 3 {
		t.Fatalf("%d messages stored, want 3", n)
	}
	if got := e.inbox(t, "carol@example.com"); len(got) != 1 || !strings.HasPrefix(got[0], "Return-Path: <>\r\n") {
		t.Fatalf("bounce copy: %q", got)
	}
}

func TestMalformedCommands(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("MAIL FROM:<sender@remote.test>", 503) // before EHLO (RFC 5321 §4.1.4)
	c.expect("EHLO client.test", 250)
	c.expect("RCPT TO:<alice@example.com>", 503) // before MAIL
	c.expect("MAIL FROM:sender", 501)
	c.expect("MAIL FROM:<sender@remote.test> FOO=BAR", 555) // RFC 5321 §4.1.1.11
	c.expect("FOO", 500)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:alice", 501)
	c.expect("RSET", 250)
	// The session survives all of that.
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, simpleMessage); code != 250 {
		t.Fatalf("after malformed commands: %d %s", code, msg)
	}
}

func TestMaxErrors(t *testing.T) {
	e := newEnv(t, Config{MaxErrors: 3})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	for i := 0; i < 3; i++ {
		c.expect("RCPT TO:<harvest"+itoa(i)+"@example.com>", 550)
	}
	if msg := c.expect("RCPT TO:<harvest9@example.com>", 421); !strings.HasPrefix(msg, "4.7.0 ") {
		t.Fatalf("421 reply %q", msg)
	}
	c.expectClosed()
}

func TestMaxRecipients(t *testing.T) {
	e := newEnv(t, Config{MaxRecipients: 2})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:<alice@example.com>", 250)
	c.expect("RCPT TO:<bob@example.com>", 250)
	c.expect("RCPT TO:<carol@example.com>", 452)
}

// A 10 MB command line is refused after MaxLineLength bytes; the server
// does not buffer it.
func TestHugeCommandLine(t *testing.T) {
	e := newEnv(t, Config{MaxLineLength: 4096})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	line := []byte("MAIL FROM:<" + strings.Repeat("a", 10<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	go func() { _, _ = c.conn.Write(line) }() // fails once the server closes
	code, _ := c.reply()
	if code != 500 {
		t.Fatalf("huge line: reply %d, want 500", code)
	}
	c.expectClosed()
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("server allocated %d bytes for a refused line", grew)
	}
}

func TestSMTPUTF8(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<jürgen@remote.test> SMTPUTF8", 250)
	c.expect("RCPT TO:<alice@example.com>", 250)
	c.expect("DATA", 354)
	c.send("From: jürgen@remote.test\r\nSubject: grüße\r\n\r\nHallo.\r\n.\r\n")
	c.expectReply(250, "end of data")
	got := e.inbox(t, "alice@example.com")
	if len(got) != 1 || !strings.HasPrefix(got[0], "Return-Path: <jürgen@remote.test>\r\n") ||
		!strings.Contains(got[0], " with UTF8SMTP id ") {
		t.Fatalf("SMTPUTF8 message: %q", got)
	}
}

// failingDeliver is a store whose Deliver fails with internal detail.
type failingDeliver struct{ *sqlite.Store }

func (failingDeliver) Deliver(context.Context, store.Delivery) ([]store.Delivered, error) {
	return nil, errors.New("disk I/O error at /var/lib/pimail/secret.db")
}

func TestStoreErrorIs451WithoutDetail(t *testing.T) {
	e := newEnvWith(t, Config{}, func(st *sqlite.Store) store.Store { return failingDeliver{st} })
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, simpleMessage)
	if code != 451 || !strings.HasPrefix(msg, "4.3.0 ") {
		t.Fatalf("store failure: %d %s, want 451 4.3.0", code, msg)
	}
	if strings.Contains(msg, "disk") || strings.Contains(msg, "/var") {
		t.Fatalf("reply leaks internal detail: %q", msg)
	}
	c.expect("NOOP", 250)
}

// An account added from outside (another process, the admin command) is
// accepted at RCPT within a second.
func TestDirectoryReload(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:<newbie@example.com>", 550)
	acc, err := e.st.AddAccount(context.Background(), "newbie@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	e.ids["newbie@example.com"] = acc.ID
	deadline := time.Now().Add(time.Second)
	for {
		code, _ := c.cmd("RCPT TO:<newbie@example.com>")
		if code == 250 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new account not accepted within 1s (last reply %d)", code)
		}
		time.Sleep(50 * time.Millisecond)
		c.expect("RSET", 250)
		c.expect("MAIL FROM:<sender@remote.test>", 250)
	}
	c.expect("DATA", 354)
	c.send(simpleMessage + ".\r\n")
	c.expectReply(250, "end of data")
	if got := e.inbox(t, "newbie@example.com"); len(got) != 1 {
		t.Fatalf("newbie has %d messages", len(got))
	}
}

// Close ends open sessions and returns; Serve returns nil (checked in the
// env cleanup), and a second Close is harmless.
func TestCloseEndsSessions(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	if _, err := net.DialTimeout("tcp", e.addr, time.Second); err == nil {
		t.Fatal("listener still accepts after Close")
	}
}

// RFC 5321 §4.5.3.2: an idle client is dropped after the command timeout,
// and a stalled message after the data timeout, with nothing stored.
func TestTimeouts(t *testing.T) {
	e := newEnv(t, Config{ReadTimeout: 300 * time.Millisecond, DataTimeout: 300 * time.Millisecond})
	idle := dial(t, e.addr)
	if code, _ := idle.reply(); code != 421 {
		t.Fatalf("idle session: reply %d, want 421", code)
	}
	idle.expectClosed()

	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:<alice@example.com>", 250)
	c.expect("DATA", 354)
	c.send("Subject: stalled\r\n\r\npart of a message\r\n")
	if code, msg := c.reply(); code != 451 {
		t.Fatalf("stalled data: %d %s, want 451", code, msg)
	}
	c.expectClosed()
	if n := e.messages(t); n != 0 {
		t.Fatalf("%d messages stored, want 0", n)
	}
}

// TestFullMailboxRefusedAtRCPT: a recipient over its quota gets 452 4.2.2
// at RCPT, and the other recipients of the transaction get the message.
func TestFullMailboxRefusedAtRCPT(t *testing.T) {
	e := newEnv(t, Config{})
	if err := e.st.SetQuota(context.Background(), "bob@example.com", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.dir.Reload(context.Background()); err != nil { // as the directory's poll does
		t.Fatal(err)
	}
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	c.expect("MAIL FROM:<sender@remote.test> SIZE=100", 250)
	if msg := c.expect("RCPT TO:<bob@example.com>", 452); !strings.HasPrefix(msg, "4.2.2 ") {
		t.Fatalf("full mailbox reply %q, want 4.2.2", msg)
	}
	c.expect("RCPT TO:<alice@example.com>", 250)
	c.expect("DATA", 354)
	c.send(simpleMessage + ".\r\n")
	c.expectReply(250, "end of data")
	if got := e.inbox(t, "alice@example.com"); len(got) != 1 {
		t.Fatalf("alice got %d messages, want 1", len(got))
	}
}

// TestSpoolFailureKeepsSession: when a large message cannot be spooled
// (here a spool directory that does not exist; in production a full
// disk), the rest of its data is read and dropped, the message is refused
// with a temporary error after its end, and the session goes on in step:
// the commands sent after the data are not read as message text.
func TestSpoolFailureKeepsSession(t *testing.T) {
	const threshold = 4 << 10
	e := newEnv(t, Config{SpoolThreshold: threshold, SpoolDir: filepath.Join(t.TempDir(), "missing")})
	c := dial(t, e.addr)
	c.expect("EHLO client.test", 250)
	big := simpleMessage + strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\r\n", 4*threshold/64)
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, big); code != 451 || !strings.HasPrefix(msg, "4.3.0 ") {
		t.Fatalf("DATA that cannot be spooled: %d %s", code, msg)
	}
	c.expect("NOOP", 250)
	c.expect("MAIL FROM:<sender@remote.test>", 250)
	c.expect("RCPT TO:<alice@example.com>", 250)
	c.send("BDAT " + itoa(len(big)) + " LAST\r\n" + big)
	if code, msg := c.reply(); code != 451 {
		t.Fatalf("BDAT that cannot be spooled: %d %s", code, msg)
	}
	c.expect("NOOP", 250)
	if n := e.messages(t); n != 0 {
		t.Fatalf("%d messages stored, want 0", n)
	}
	// A message under the threshold, kept in memory, still goes through.
	if code, msg := c.transaction("sender@remote.test", []string{"alice@example.com"}, simpleMessage); code != 250 {
		t.Fatalf("small message: %d %s", code, msg)
	}
}
