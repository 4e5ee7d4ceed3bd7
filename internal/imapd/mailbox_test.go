package imapd

import (
	"strings"
	"testing"
)

func TestSelectRev1AndRev2(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	r := e.raw()
	r.login()
	res := r.cmd("s", "SELECT inbox")
	all := strings.Join(res, "\n")
	for _, want := range []string{"* 1 EXISTS", "* 1 RECENT", "* FLAGS (", "PERMANENTFLAGS (", "[UIDVALIDITY ", "[UIDNEXT 2]", "[UNSEEN 1]", "s OK [READ-WRITE]"} {
		if !strings.Contains(all, want) {
			t.Errorf("rev1 SELECT lacks %q: %q", want, res)
		}
	}
	r.cmd("e", "ENABLE IMAP4rev2")
	res = r.cmd("x", "EXAMINE INBOX")
	all = strings.Join(res, "\n")
	if !strings.Contains(all, "OK [CLOSED]") || strings.Contains(all, "RECENT") || !strings.Contains(all, `* LIST () "/" INBOX`) || !strings.Contains(all, "x OK [READ-ONLY]") {
		t.Errorf("rev2 EXAMINE: %q", res)
	}
	if l := last(r.cmd("st", `STORE 1 +FLAGS (\Seen)`)); !strings.HasPrefix(l, "st NO") {
		t.Errorf("STORE in read-only: %q", l)
	}
	if l := last(r.cmd("n", "SELECT Nope")); !strings.HasPrefix(l, "n NO [NONEXISTENT]") {
		t.Errorf("select missing: %q", l)
	}
}

func TestCreateListRenameDelete(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	r.login()
	if l := last(r.cmd("c", "CREATE Lists/golang/nuts")); !strings.HasPrefix(l, "c OK [MAILBOXID (M") || !strings.HasSuffix(l, ")] CREATE completed") {
		t.Fatalf("create: %q", l)
	}
	if l := last(r.cmd("c2", "CREATE Lists")); !strings.HasPrefix(l, "c2 NO [ALREADYEXISTS]") {
		t.Fatalf("create existing: %q", l)
	}
	res := r.cmd("l", `LIST "" "*"`)
	all := strings.Join(res, "\n")
	for _, want := range []string{
		`* LIST (\HasNoChildren) "/" INBOX`,
		`* LIST (\HasNoChildren \Sent) "/" Sent`,
		`* LIST (\HasChildren) "/" Lists`,
		`* LIST (\HasChildren) "/" Lists/golang`,
		`* LIST (\HasNoChildren) "/" Lists/golang/nuts`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("LIST lacks %q: %q", want, res)
		}
	}
	res = r.cmd("l2", `LIST "" "Lists/%"`)
	if len(res) != 2 || !strings.HasSuffix(res[0], "Lists/golang") {
		t.Errorf("LIST %%: %q", res)
	}
	if res := r.cmd("l3", `LIST "" ""`); res[0] != `* LIST (\Noselect) "/" ""` {
		t.Errorf("LIST delimiter: %q", res)
	}
	res = r.cmd("l4", `LIST (SPECIAL-USE) "" "*" RETURN (SUBSCRIBED)`)
	if len(res) != 6 || !strings.Contains(strings.Join(res, "\n"), `\Junk`) {
		t.Errorf("LIST SPECIAL-USE: %q", res)
	}
	if l := last(r.cmd("r", "RENAME Lists Archive2")); l != "r OK RENAME completed" {
		t.Fatalf("rename: %q", l)
	}
	res = r.cmd("l5", `LIST "" "Archive2/*"`)
	if len(res) != 3 {
		t.Errorf("after rename: %q", res)
	}
	if l := last(r.cmd("d", "DELETE Archive2/golang/nuts")); l != "d OK DELETE completed" {
		t.Fatalf("delete: %q", l)
	}
	if l := last(r.cmd("d2", "DELETE INBOX")); !strings.HasPrefix(l, "d2 NO") {
		t.Fatalf("delete INBOX: %q", l)
	}
	// Modified UTF-7 for rev1 clients.
	if l := last(r.cmd("u", "CREATE Entw&APw-rfe")); !strings.HasPrefix(l, "u OK [MAILBOXID (") {
		t.Fatalf("create utf7: %q", l)
	}
	if res := r.cmd("u2", `LIST "" Entw*`); res[0] != `* LIST (\HasNoChildren) "/" Entw&APw-rfe` {
		t.Errorf("utf7 list: %q", res)
	}
	r.cmd("en", "ENABLE UTF8=ACCEPT")
	if res := r.cmd("u3", `LIST "" Entw*`); res[0] != `* LIST (\HasNoChildren) "/" "Entwürfe"` {
		t.Errorf("utf8 list: %q", res)
	}
}

func TestSubscribeLsubStatus(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	e.deliver("", multipartMsg)
	r := e.raw()
	r.login()
	r.cmd("c", "CREATE Work")
	if l := last(r.cmd("s", "SUBSCRIBE Work")); l != "s OK SUBSCRIBE completed" {
		t.Fatalf("subscribe: %q", l)
	}
	res := r.cmd("l", `LSUB "" "*"`)
	if !strings.Contains(strings.Join(res, "\n"), `* LSUB () "/" Work`) {
		t.Errorf("LSUB: %q", res)
	}
	r.cmd("u", "UNSUBSCRIBE Work")
	if res := r.cmd("l2", `LSUB "" "Work"`); len(res) != 1 {
		t.Errorf("LSUB after unsubscribe: %q", res)
	}
	r.cmd("sel", "SELECT INBOX")
	r.cmd("st", `STORE 1 +FLAGS.SILENT (\Deleted \Seen)`)
	res = r.cmd("x", "STATUS INBOX (MESSAGES UIDNEXT UNSEEN DELETED SIZE UIDVALIDITY RECENT)")
	want := "* STATUS INBOX (MESSAGES 2 UIDNEXT 3 UNSEEN 1 DELETED 1 SIZE "
	if !strings.HasPrefix(res[0], want) || !strings.Contains(res[0], "RECENT 2)") {
		t.Errorf("STATUS: %q", res)
	}
	res = r.cmd("ls", `LIST "" "INBOX" RETURN (STATUS (MESSAGES))`)
	if len(res) != 3 || res[1] != "* STATUS INBOX (MESSAGES 2)" {
		t.Errorf("LIST-STATUS: %q", res)
	}
}

func TestMatchPattern(t *testing.T) {
	cases := []struct {
		p, n string
		ok   bool
	}{
		{"*", "a/b/c", true}, {"%", "a/b", false}, {"%", "a", true}, {"a/%", "a/b", true},
		{"a/%", "a/b/c", false}, {"a*c", "a/b/c", true}, {"a%c", "abc", true}, {"a%c", "a/c", false},
		{"INBOX", "INBOX", true}, {"", "x", false}, {strings.Repeat("*%", 400), "abc", true},
	}
	for _, c := range cases {
		if got := matchPattern(canonicalPattern(c.p), c.n); got != c.ok {
			t.Errorf("match(%q, %q) = %v", c.p, c.n, got)
		}
	}
}
