package imapd

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestMultiAppend: RFC 3502 MULTIAPPEND with synchronising and
// non-synchronising literals, each message with its own flags and date;
// one APPENDUID with the UID set (RFC 4315 §3); the selected mailbox sees
// the new messages.
func TestMultiAppend(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("INBOX", "Subject: first\r\n\r\nx\r\n")
	r := e.raw()
	r.login()
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " MULTIAPPEND ") {
		t.Fatalf("MULTIAPPEND not advertised: %q", res[0])
	}
	if l := last(r.cmd("s", "SELECT INBOX")); !strings.HasPrefix(l, "s OK") {
		t.Fatalf("SELECT: %q", l)
	}
	m1 := "Subject: one\r\n\r\nbody one\r\n"
	m2 := "Subject: two\r\n\r\nbody two, longer\r\n"
	m3 := "Subject: three\r\n\r\n3\r\n"
	r.send(fmt.Sprintf("a APPEND INBOX (\\Seen) {%d}\r\n", len(m1)))
	if l := r.line(); !strings.HasPrefix(l, "+") {
		t.Fatalf("continuation 1: %q", l)
	}
	r.send(m1 + fmt.Sprintf(` (\Flagged $Work) "07-Feb-2024 10:11:12 +0100" {%d}`+"\r\n", len(m2)))
	if l := r.line(); !strings.HasPrefix(l, "+") {
		t.Fatalf("continuation 2: %q", l)
	}
	r.send(m2 + fmt.Sprintf(" {%d+}\r\n", len(m3)) + m3 + "\r\n")
	res := r.until("a ")
	st, err := e.st.MailboxStatus(context.Background(), e.acct.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("a OK [APPENDUID %d 2:4] ", st.UIDValidity)
	if !strings.HasPrefix(last(res), want) {
		t.Fatalf("MULTIAPPEND: %q, want %q…", res, want)
	}
	if !strings.Contains(strings.Join(res, "\n"), "* 4 EXISTS") {
		t.Fatalf("no EXISTS for the selected mailbox: %q", res)
	}
	res = r.cmd("f", "UID FETCH 2:4 (FLAGS INTERNALDATE RFC822.SIZE)")
	if len(res) != 4 ||
		!strings.Contains(res[0], `UID 2 FLAGS (\Seen \Recent)`) || !strings.Contains(res[0], fmt.Sprintf("RFC822.SIZE %d", len(m1))) ||
		!strings.Contains(res[1], `FLAGS (\Flagged \Recent $Work)`) || !strings.Contains(res[1], `INTERNALDATE "07-Feb-2024 09:11:12 +0000"`) ||
		!strings.Contains(res[2], `FLAGS (\Recent)`) || !strings.Contains(res[2], fmt.Sprintf("RFC822.SIZE %d", len(m3))) {
		t.Fatalf("FETCH of the appended messages: %q", res)
	}
	res = r.cmd("b", "UID FETCH 3 BODY.PEEK[]")
	if !strings.Contains(strings.Join(res, "\n"), "body two, longer") {
		t.Fatalf("body of message 2: %q", res)
	}
	// A single APPEND still answers one UID.
	if l := last(r.cmd("o", fmt.Sprintf("APPEND INBOX {%d+}\r\n%s", len(m3), m3))); !strings.HasPrefix(l, fmt.Sprintf("o OK [APPENDUID %d 5] ", st.UIDValidity)) {
		t.Fatalf("single APPEND: %q", l)
	}
}

// TestMultiAppendAllOrNothing: when one message of a MULTIAPPEND is
// refused, none is stored (RFC 3502 §6.3.11): an empty message, a command
// over the quota although each message fits, a missing mailbox.
func TestMultiAppendAllOrNothing(t *testing.T) {
	e := newTestEnv(t, Config{})
	if err := e.st.SetQuota(context.Background(), e.acct.Address, 10*1024); err != nil {
		t.Fatal(err)
	}
	r := e.raw()
	r.login()
	small := "Subject: s\r\n\r\nok\r\n"
	big := "Subject: b\r\n\r\n" + strings.Repeat("x", 6000) + "\r\n"
	count := func() string {
		t.Helper()
		return r.cmd("n", "STATUS INBOX (MESSAGES UIDNEXT)")[0]
	}
	before := count()
	cases := []struct{ name, cmd, want string }{
		{"empty", fmt.Sprintf("APPEND INBOX {%d+}\r\n%s {0+}\r\n", len(small), small), "NO [CANNOT]"},
		{"quota", fmt.Sprintf("APPEND INBOX {%d+}\r\n%s {%d+}\r\n%s", len(big), big, len(big), big), "NO [OVERQUOTA]"},
		{"missing", fmt.Sprintf("APPEND Nowhere {%d+}\r\n%s {%d+}\r\n%s", len(small), small, len(small), small), "NO [TRYCREATE]"},
		{"no literal", fmt.Sprintf(`APPEND INBOX {%d+}`+"\r\n%s (\\Seen)", len(small), small), "BAD"},
	}
	for i, c := range cases {
		tag := fmt.Sprintf("x%d", i)
		if l := last(r.cmd(tag, c.cmd)); !strings.HasPrefix(l, tag+" "+c.want) {
			t.Fatalf("%s: %q, want %s", c.name, l, c.want)
		}
		if got := count(); got != before {
			t.Fatalf("%s: stored something: %q, before %q", c.name, got, before)
		}
	}
	// The same big message once fits.
	if l := last(r.cmd("y", fmt.Sprintf("APPEND INBOX {%d+}\r\n%s {%d+}\r\n%s", len(small), small, len(big), big))); !strings.HasPrefix(l, "y OK [APPENDUID ") || !strings.Contains(l, " 1:2] ") {
		t.Fatalf("MULTIAPPEND under quota: %q", l)
	}
}
