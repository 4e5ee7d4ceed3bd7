package pop3d

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

const (
	msg1 = "From: a@example.net\r\nSubject: one\r\n\r\nfirst body\r\n"
	msg2 = "From: b@example.net\r\nSubject: two\r\n\r\nline 1\r\nline 2\r\nline 3\r\n"
	msg3 = "From: c@example.net\r\nSubject: three\r\n\r\nthird\r\n"
)

func TestStatListUidlNoop(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	var uids []uint32
	for _, m := range []string{msg1, msg2, msg3} {
		uids = append(uids, e.deliver(m).UID)
	}
	metas := e.inbox()
	var total int64
	for _, m := range metas {
		total += m.Size
	}
	c := e.dial()
	c.login("alice@example.org")
	if got, want := c.ok("STAT"), fmt.Sprintf("+OK 3 %d", total); got != want {
		t.Errorf("STAT = %q, want %q", got, want)
	}
	lines := c.multiLines("LIST")
	if len(lines) != 3 {
		t.Fatalf("LIST = %q", lines)
	}
	for i, l := range lines {
		if want := fmt.Sprintf("%d %d", i+1, metas[i].Size); l != want {
			t.Errorf("LIST line %d = %q, want %q", i+1, l, want)
		}
	}
	if got, want := c.ok("LIST 2"), fmt.Sprintf("+OK 2 %d", metas[1].Size); got != want {
		t.Errorf("LIST 2 = %q, want %q", got, want)
	}
	for _, bad := range []string{"LIST 0", "LIST 4", "LIST x", "LIST -1", "UIDL 9"} {
		if r := c.cmd(bad); !strings.HasPrefix(r, "-ERR") {
			t.Errorf("%s = %q, want -ERR", bad, r)
		}
	}
	lines = c.multiLines("UIDL")
	if len(lines) != 3 {
		t.Fatalf("UIDL = %q", lines)
	}
	for i, l := range lines {
		if want := fmt.Sprintf("%d %d.%d", i+1, e.inbx.UIDValidity, uids[i]); l != want {
			t.Errorf("UIDL line %d = %q, want %q", i+1, l, want)
		}
	}
	if got, want := c.ok("uidl 3"), fmt.Sprintf("+OK 3 %d.%d", e.inbx.UIDValidity, uids[2]); got != want {
		t.Errorf("UIDL 3 = %q, want %q", got, want)
	}
	c.ok("NOOP")
	if r := c.cmd("NOOP x"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("NOOP x = %q", r)
	}
	if r := c.ok("QUIT"); !strings.Contains(r, "3 messages left") {
		t.Errorf("QUIT = %q", r)
	}
	c.closed()
}

func TestRetrSendsStoredBytes(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	e.deliver(msg2)
	c := e.dial()
	c.login("alice@example.org")
	size := e.inbox()[0].Size
	if got, want := c.ok("RETR 1"), fmt.Sprintf("+OK %d octets", size); got != want {
		t.Errorf("RETR = %q, want %q", got, want)
	}
	if got := c.multi(); got != msg2 {
		t.Errorf("RETR body = %q, want %q", got, msg2)
	}
	if r := c.cmd("RETR 2"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("RETR 2 = %q", r)
	}
	if r := c.cmd("RETR"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("RETR without argument = %q", r)
	}
	c.ok("QUIT")
	// RETR marks the message seen at QUIT.
	if f := e.inbox()[0].Flags; f&store.FlagSeen == 0 {
		t.Errorf("flags after RETR and QUIT = %v, want \\Seen", f)
	}
}

func TestRetrDotStuffingAndBareLF(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	// Stored with bare LFs, lines starting with dots and no final newline.
	stored := "Subject: dots\n\n.\n..two\n.three\r\nplain\nend."
	if _, err := e.st.Append(context.Background(), e.inbx.ID, []byte(stored), 0, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	c := e.dial()
	c.login("alice@example.org")
	c.ok("RETR 1")
	want := "Subject: dots\r\n\r\n..\r\n...two\r\n..three\r\nplain\r\nend.\r\n"
	if got := c.multi(); got != want {
		t.Errorf("RETR = %q, want %q", got, want)
	}
	c.ok("TOP 1 1")
	if got, want := c.multi(), "Subject: dots\r\n\r\n..\r\n"; got != want {
		t.Errorf("TOP 1 1 = %q, want %q", got, want)
	}
}

func TestTop(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	e.deliver(msg2)
	c := e.dial()
	c.login("alice@example.org")
	header := "From: b@example.net\r\nSubject: two\r\n\r\n"
	for n, want := range map[int]string{
		0:  header,
		2:  header + "line 1\r\nline 2\r\n",
		99: msg2,
	} {
		c.ok(fmt.Sprintf("TOP 1 %d", n))
		if got := c.multi(); got != want {
			t.Errorf("TOP 1 %d = %q, want %q", n, got, want)
		}
	}
	for _, bad := range []string{"TOP", "TOP 1", "TOP 1 x", "TOP 1 -1", "TOP 2 1"} {
		if r := c.cmd(bad); !strings.HasPrefix(r, "-ERR") {
			t.Errorf("%s = %q, want -ERR", bad, r)
		}
	}
	c.ok("QUIT")
	// TOP does not mark the message seen.
	if f := e.inbox()[0].Flags; f&store.FlagSeen != 0 {
		t.Errorf("flags after TOP = %v, want not \\Seen", f)
	}
}

func TestDeleRset(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	e.deliver(msg1)
	e.deliver(msg2)
	c := e.dial()
	c.login("alice@example.org")
	c.ok("DELE 1")
	if r := c.ok("STAT"); !strings.HasPrefix(r, "+OK 1 ") {
		t.Errorf("STAT after DELE = %q", r)
	}
	for _, cmd := range []string{"DELE 1", "RETR 1", "LIST 1", "TOP 1 0", "UIDL 1"} {
		if r := c.cmd(cmd); !strings.HasPrefix(r, "-ERR") {
			t.Errorf("%s of deleted message = %q", cmd, r)
		}
	}
	if lines := c.multiLines("LIST"); len(lines) != 1 || !strings.HasPrefix(lines[0], "2 ") {
		t.Errorf("LIST after DELE = %q", lines)
	}
	if lines := c.multiLines("UIDL"); len(lines) != 1 || !strings.HasPrefix(lines[0], "2 ") {
		t.Errorf("UIDL after DELE = %q", lines)
	}
	if r := c.ok("RSET"); !strings.HasPrefix(r, "+OK maildrop has 2 messages") {
		t.Errorf("RSET = %q", r)
	}
	if r := c.ok("STAT"); !strings.HasPrefix(r, "+OK 2 ") {
		t.Errorf("STAT after RSET = %q", r)
	}
	c.ok("RETR 1")
	c.multi()
	c.ok("QUIT")
	if n := len(e.inbox()); n != 2 {
		t.Errorf("%d messages after RSET and QUIT, want 2", n)
	}
}

func TestDeleQuitExpunges(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	d1 := e.deliver(msg1)
	d2 := e.deliver(msg2)
	d3 := e.deliver(msg3)
	d4 := e.deliver(msg3)
	c := e.dial()
	c.login("alice@example.org")
	c.ok("DELE 2")
	c.ok("DELE 3")
	// An IMAP client flags message 4 \Deleted meanwhile: POP3's QUIT must
	// expunge exactly its own deletions, not that one.
	if _, err := e.st.StoreFlags(context.Background(), e.inbx.ID, store.UIDSet{{Start: d4.UID, Stop: d4.UID}},
		store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if r := c.ok("QUIT"); !strings.Contains(r, "2 messages left") {
		t.Errorf("QUIT = %q", r)
	}
	c.closed()
	var left []uint32
	for _, m := range e.inbox() {
		left = append(left, m.UID)
	}
	if fmt.Sprint(left) != fmt.Sprint([]uint32{d1.UID, d4.UID}) {
		t.Errorf("UIDs after QUIT = %v, want %v (deleted %d, %d)", left, []uint32{d1.UID, d4.UID}, d2.UID, d3.UID)
	}
	c = e.dial()
	c.login("alice@example.org")
	if r := c.ok("STAT"); !strings.HasPrefix(r, "+OK 2 ") {
		t.Errorf("STAT in the next session = %q", r)
	}
	if got, want := c.ok("UIDL 2"), fmt.Sprintf("+OK 2 %d.%d", e.inbx.UIDValidity, d4.UID); got != want {
		t.Errorf("UIDL 2 = %q, want %q", got, want)
	}
}

func TestDisconnectWithoutQuitKeepsMessages(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	e.deliver(msg1)
	c := e.dial()
	c.login("alice@example.org")
	c.ok("DELE 1")
	c.c.Close()
	// The lock is released when the session ends; the next login proves
	// it and sees the message still there.
	c2 := waitLogin(t, e)
	if r := c2.ok("STAT"); !strings.HasPrefix(r, "+OK 1 ") {
		t.Errorf("STAT after a session ended without QUIT = %q", r)
	}
}

// waitLogin logs alice in, retrying while the previous session's lock is
// still held (bounded).
func waitLogin(t *testing.T, e *testEnv) *conn {
	t.Helper()
	for i := 0; i < 100; i++ {
		c := e.dial()
		c.ok("USER alice@example.org")
		r := c.cmd("PASS " + testPassword)
		if strings.HasPrefix(r, "+OK") {
			return c
		}
		if !strings.HasPrefix(r, "-ERR [IN-USE]") {
			t.Fatalf("PASS = %q", r)
		}
		c.c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("maildrop still locked")
	return nil
}

func TestInUse(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	e.deliver(msg1)
	a := e.dial()
	a.login("alice@example.org")
	b := e.dial()
	b.ok("USER alice@example.org")
	if r := b.cmd("PASS " + testPassword); !strings.HasPrefix(r, "-ERR [IN-USE]") {
		t.Fatalf("second session PASS = %q, want -ERR [IN-USE]", r)
	}
	// Another account is not affected.
	o := e.dial()
	o.login("bob@example.org")
	if r := o.ok("STAT"); r != "+OK 0 0" {
		t.Errorf("bob STAT = %q", r)
	}
	// The session stays in AUTHORIZATION and can try again after the
	// first one quits.
	a.ok("QUIT")
	a.closed()
	b.ok("USER alice@example.org")
	b.ok("PASS " + testPassword)
	b.ok("STAT")
}

func TestSnapshotAtLogin(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	e.deliver(msg1)
	c := e.dial()
	c.login("alice@example.org")
	e.deliver(msg2)
	if r := c.ok("STAT"); !strings.HasPrefix(r, "+OK 1 ") {
		t.Errorf("STAT after a new delivery = %q, want the login snapshot", r)
	}
	if r := c.cmd("RETR 2"); !strings.HasPrefix(r, "-ERR") {
		t.Errorf("RETR of a message that arrived later = %q", r)
	}
	c.ok("DELE 1")
	c.ok("QUIT")
	c = e.dial()
	c.login("alice@example.org")
	if r := c.ok("STAT"); !strings.HasPrefix(r, "+OK 1 ") {
		t.Errorf("STAT in the next session = %q", r)
	}
	c.ok("RETR 1")
	if got := c.multi(); got != msg2 {
		t.Errorf("next session RETR 1 = %q, want the new message", got)
	}
}

func TestPipelining(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	e.deliver(msg1)
	e.deliver(msg2)
	c := e.dial()
	c.send("USER alice@example.org\r\nPASS " + testPassword + "\r\nSTAT\r\nRETR 1\r\nDELE 2\r\nBOGUS\r\nLIST\r\nQUIT\r\n")
	for _, want := range []string{"+OK", "+OK", "+OK 2 "} {
		if r := c.line(); !strings.HasPrefix(r, want) {
			t.Fatalf("response %q, want prefix %q", r, want)
		}
	}
	if r := c.line(); !strings.HasPrefix(r, "+OK") {
		t.Fatalf("RETR = %q", r)
	}
	if got := c.multi(); got != msg1 {
		t.Errorf("RETR body = %q", got)
	}
	for _, want := range []string{"+OK message 2 deleted", "-ERR", "+OK 1 messages"} {
		if r := c.line(); !strings.HasPrefix(r, want) {
			t.Fatalf("response %q, want prefix %q", r, want)
		}
	}
	if got := c.multi(); !strings.HasPrefix(got, "1 ") || strings.Count(got, "\r\n") != 1 {
		t.Errorf("LIST body = %q", got)
	}
	if r := c.line(); !strings.HasPrefix(r, "+OK") {
		t.Fatalf("QUIT = %q", r)
	}
	c.closed()
	if n := len(e.inbox()); n != 1 {
		t.Errorf("%d messages after pipelined DELE and QUIT, want 1", n)
	}
}

func TestIdleTimeoutSkipsUpdate(t *testing.T) {
	e := newTestEnv(t, Config{IdleTimeout: 300 * time.Millisecond}, nil)
	e.deliver(msg1)
	c := e.dial()
	c.login("alice@example.org")
	c.ok("DELE 1")
	// RFC 1939 §3: autologout closes without a response and without UPDATE.
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := c.br.ReadString('\n'); err == nil {
		t.Fatalf("got %q after the idle timeout, want a closed connection", l)
	}
	if n := len(e.inbox()); n != 1 {
		t.Errorf("%d messages after autologout, want 1", n)
	}
}

func TestCloseEndsSessions(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	c := e.dial()
	c.login("alice@example.org")
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	c.closed()
}
