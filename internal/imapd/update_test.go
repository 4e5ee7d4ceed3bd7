package imapd

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

func TestStoreFlags(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	e.deliver("", multipartMsg)
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	// A new keyword is announced in FLAGS and PERMANENTFLAGS before the
	// FETCH that shows it (RFC 3501 §7.2.6).
	res := r.cmd("a", `STORE 1:2 +FLAGS (\Seen $Label1)`)
	if len(res) != 5 || res[0] != `* FLAGS (\Answered \Flagged \Deleted \Seen \Draft $Label1)` ||
		res[1] != `* OK [PERMANENTFLAGS (\Answered \Flagged \Deleted \Seen \Draft $Label1 \*)] Flags permitted` ||
		res[2] != `* 1 FETCH (FLAGS (\Seen \Recent $Label1))` {
		t.Fatalf("STORE +FLAGS: %q", res)
	}
	if res := r.cmd("a2", `STORE 1 +FLAGS ($Label1)`); len(res) != 2 {
		t.Fatalf("STORE of a known keyword: %q", res)
	}
	res = r.cmd("b", `UID STORE 2 -FLAGS.SILENT (\Seen)`)
	if len(res) != 1 {
		t.Fatalf("STORE .SILENT: %q", res)
	}
	res = r.cmd("c", `STORE 1 FLAGS \Flagged`)
	if res[0] != `* 1 FETCH (FLAGS (\Flagged \Recent))` {
		t.Fatalf("STORE FLAGS: %q", res)
	}
	res = r.cmd("d", "FETCH 1:2 FLAGS")
	if res[0] != `* 1 FETCH (FLAGS (\Flagged \Recent))` || res[1] != `* 2 FETCH (FLAGS (\Recent $Label1))` {
		t.Fatalf("flags: %q", res)
	}
	if l := last(r.cmd("e", `STORE 1 +FLAGS (\Bogus)`)); !strings.HasPrefix(l, "e BAD") {
		t.Fatalf("unknown system flag: %q", l)
	}
}

func TestCopyMoveExpunge(t *testing.T) {
	e := newTestEnv(t, Config{})
	for i := 0; i < 4; i++ {
		e.deliver("", multipartMsg)
	}
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	if l := last(r.cmd("c", "COPY 1:2 Archive")); !strings.HasPrefix(l, "c OK [COPYUID ") || !strings.HasSuffix(l, " 1:2 1:2] COPY completed") {
		t.Fatalf("COPY: %q", l)
	}
	if l := last(r.cmd("c2", "COPY 1 Nowhere")); !strings.HasPrefix(l, "c2 NO [TRYCREATE]") {
		t.Fatalf("COPY to missing: %q", l)
	}
	res := r.cmd("m", "UID MOVE 3 Trash")
	if len(res) != 3 || !strings.HasPrefix(res[0], "* OK [COPYUID ") || res[1] != "* 3 EXPUNGE" {
		t.Fatalf("MOVE: %q", res)
	}
	r.cmd("st", `STORE 1 +FLAGS.SILENT (\Deleted)`)
	res = r.cmd("x", "EXPUNGE")
	if len(res) != 2 || res[0] != "* 1 EXPUNGE" {
		t.Fatalf("EXPUNGE: %q", res)
	}
	r.cmd("st2", `STORE 1:* +FLAGS.SILENT (\Deleted)`)
	res = r.cmd("ux", "UID EXPUNGE 4")
	if len(res) != 2 || res[0] != "* 2 EXPUNGE" {
		t.Fatalf("UID EXPUNGE: %q", res)
	}
	res = r.cmd("f", "UID FETCH 1:* UID")
	if len(res) != 2 || res[0] != "* 1 FETCH (UID 2)" {
		t.Fatalf("remaining: %q", res)
	}
	res = r.cmd("cl", "CLOSE")
	res = r.cmd("st", "STATUS INBOX (MESSAGES)")
	if res[0] != "* STATUS INBOX (MESSAGES 0)" {
		t.Fatalf("CLOSE did not expunge: %q", res)
	}
	if res = r.cmd("st2", "STATUS Archive (MESSAGES)"); res[0] != "* STATUS Archive (MESSAGES 2)" {
		t.Fatalf("archive: %q", res)
	}
}

// Two sessions on one mailbox: an expunge in one is reported to the other
// at the right moment, never during a sequence-number FETCH.
func TestTwoSessionsExpunge(t *testing.T) {
	e := newTestEnv(t, Config{})
	for i := 0; i < 3; i++ {
		e.deliver("", multipartMsg)
	}
	a, b := e.raw(), e.raw()
	a.login()
	b.login()
	a.cmd("s", "SELECT INBOX")
	b.cmd("s", "SELECT INBOX")
	a.cmd("d", `STORE 2 +FLAGS.SILENT (\Deleted)`)
	if res := a.cmd("x", "EXPUNGE"); res[0] != "* 2 EXPUNGE" {
		t.Fatalf("a EXPUNGE: %q", res)
	}
	// b: FETCH must not report the EXPUNGE, and still numbers 3 messages.
	res := b.cmd("f", "FETCH 1:* UID")
	joined := strings.Join(res, "\n")
	if strings.Contains(joined, "EXPUNGE") || !strings.Contains(joined, "* 1 FETCH (UID 1)") || !strings.Contains(joined, "* 3 FETCH (UID 3)") {
		t.Fatalf("b FETCH: %q", res)
	}
	res = b.cmd("n", "NOOP")
	if len(res) != 2 || res[0] != "* 2 EXPUNGE" {
		t.Fatalf("b NOOP: %q", res)
	}
	if res = b.cmd("f2", "FETCH 2 UID"); res[0] != "* 2 FETCH (UID 3)" {
		t.Fatalf("b after expunge: %q", res)
	}
	// Flag changes and new mail from elsewhere reach b too.
	a.cmd("fl", `STORE 1 +FLAGS.SILENT (\Answered)`)
	e.deliver("", multipartMsg)
	res = b.cmd("n2", "NOOP")
	joined = strings.Join(res, "\n")
	if !strings.Contains(joined, "* 3 EXISTS") || !strings.Contains(joined, `* 1 FETCH (UID 1 FLAGS (\Answered))`) {
		t.Fatalf("b NOOP 2: %q", res)
	}
	if res = b.cmd("r", "FETCH 3 FLAGS"); res[0] != `* 3 FETCH (FLAGS (\Recent))` {
		t.Fatalf("recent: %q", res)
	}
}

func TestIdleDelivery(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	exists := make(chan uint32, 10)
	c := e.client(&imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				exists <- *d.NumMessages
			}
		},
	}})
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	idle, err := c.Idle()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	e.deliver("", multipartMsg)
	select {
	case n := <-exists:
		if n != 2 {
			t.Fatalf("EXISTS %d", n)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("delivery took %v to show up", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("delivery not reported during IDLE")
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idle.Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(imap.SeqSetNum(2), &imap.FetchOptions{UID: true}).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].UID != 2 {
		t.Fatalf("fetch after idle: %v %v", msgs, err)
	}
}

func TestAppend(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	r.login()
	msg := "Subject: appended\r\n\r\nbody\r\n"
	r.send(`a APPEND Drafts (\Draft $X) "07-Feb-2024 10:11:12 +0100" {` + strconv.Itoa(len(msg)) + "}\r\n")
	if l := r.line(); !strings.HasPrefix(l, "+") {
		t.Fatalf("continuation: %q", l)
	}
	r.send(msg + "\r\n")
	if l := last(r.until("a ")); !strings.HasPrefix(l, "a OK [APPENDUID ") || !strings.Contains(l, " 1] ") {
		t.Fatalf("APPEND: %q", l)
	}
	r.send("b APPEND Nope {2+}\r\nxy\r\n")
	if l := last(r.until("b ")); !strings.HasPrefix(l, "b NO [TRYCREATE]") {
		t.Fatalf("APPEND to missing: %q", l)
	}
	r.cmd("s", "SELECT Drafts")
	res := r.cmd("f", "FETCH 1 (FLAGS INTERNALDATE BODY.PEEK[])")
	if !strings.Contains(res[0], `FLAGS (\Draft \Recent $X)`) || !strings.Contains(res[0], `INTERNALDATE "07-Feb-2024 10:11:12 +0100"`) && !strings.Contains(res[0], `INTERNALDATE "07-Feb-2024 09:11:12 +0000"`) {
		t.Fatalf("fetch appended: %q", res)
	}
	// APPEND into the selected mailbox shows up as EXISTS.
	res = r.cmd("c", "APPEND Drafts {2+}\r\nhi")
	if !strings.Contains(strings.Join(res, "\n"), "* 2 EXISTS") {
		t.Fatalf("EXISTS after APPEND: %q", res)
	}
}

func TestSelectedMailboxDeletedElsewhere(t *testing.T) {
	e := newTestEnv(t, Config{})
	a, b := e.raw(), e.raw()
	a.login()
	b.login()
	a.cmd("c", "CREATE Tmp")
	b.cmd("s", "SELECT Tmp")
	if l := last(b.cmd("f", "FETCH 1:* FLAGS")); l != "f OK FETCH completed" {
		t.Fatalf("FETCH 1:* on empty mailbox: %q", l)
	}
	a.cmd("d", "DELETE Tmp")
	if res := b.cmd("n", "NOOP"); res[0] != "* BYE Selected mailbox was deleted" {
		t.Fatalf("after delete: %q", res)
	}
}
