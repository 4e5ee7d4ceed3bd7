package imapwire

import (
	"reflect"
	"testing"
)

func TestParseReturnOptions(t *testing.T) {
	opts, p, err := ParseReturnOptions(parseArgs(t, "(min PARTIAL 4:2 update)")[0])
	if err != nil || !reflect.DeepEqual(opts, []string{"MIN", "PARTIAL", "UPDATE"}) || p != (PartialRange{2, 4}) {
		t.Fatalf("got %q %+v %v", opts, p, err)
	}
	// RFC 5267 §4.4: no "*", no 0, a range.
	for _, bad := range []string{"(PARTIAL 1:*)", "(PARTIAL *:1)", "(PARTIAL 1)", "(PARTIAL 0:3)", "(PARTIAL)", "(FOO)"} {
		if _, _, err := ParseReturnOptions(parseArgs(t, bad)[0]); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestParseIMAPURL(t *testing.T) {
	u, err := ParseIMAPURL("imap://bob@example.org/Lists%2Fgo;UIDVALIDITY=785799047/;UID=113330/;SECTION=1.5.HEADER/;PARTIAL=10.20")
	want := IMAPURL{Mailbox: "Lists/go", UIDValidity: 785799047, UID: 113330,
		Section: &Section{Part: []int{1, 5}, Text: "HEADER", Raw: "1.5.HEADER"}, Partial: &Partial{Origin: 10, Count: 20, HasCount: true}}
	if err != nil || !reflect.DeepEqual(u, want) {
		t.Fatalf("got %+v %v", u, err)
	}
	if u, err := ParseIMAPURL("/INBOX/;uid=3"); err != nil || u.Mailbox != "INBOX" || u.UID != 3 || u.Section != nil {
		t.Fatalf("relative URL: %+v %v", u, err)
	}
	for _, bad := range []string{"INBOX/;UID=3", "/INBOX", "/INBOX/;SECTION=1", "/INBOX;UIDVALIDITY=x/;UID=1",
		"/INBOX/;UID=0", "/INBOX/;UID=1/;SECTION=FOO", "/INBOX/;UID=1/;PARTIAL=1.0", "imap://host"} {
		if _, err := ParseIMAPURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseNotify(t *testing.T) {
	n, err := ParseNotify(parseArgs(t, `SET STATUS (SELECTED (MessageNew (UID FLAGS) MessageExpunge)) (SUBTREE (a "b c") (MailboxName)) (INBOXES NONE)`))
	if err != nil || !n.Status || len(n.Groups) != 3 {
		t.Fatalf("got %+v %v", n, err)
	}
	g := n.Groups[0]
	if g.Filter != "SELECTED" || !reflect.DeepEqual(g.Events, []string{"MessageNew", "MessageExpunge"}) || g.NewFetch == nil {
		t.Fatalf("group 0: %+v", g)
	}
	if g := n.Groups[1]; g.Filter != "SUBTREE" || len(g.Mailboxes) != 2 || g.Mailboxes[1].Str != "b c" {
		t.Fatalf("group 1: %+v", g)
	}
	if g := n.Groups[2]; g.Filter != "INBOXES" || len(g.Events) != 0 {
		t.Fatalf("group 2: %+v", g)
	}
	if n, err := ParseNotify(parseArgs(t, "none")); err != nil || !n.None {
		t.Fatalf("NONE: %+v %v", n, err)
	}
	for _, bad := range []string{"SET", "SET STATUS", "SET (FOO (MessageNew))", "SET (MAILBOXES (MessageNew))",
		"SET (PERSONAL ())", "NONE x", "GET"} {
		if _, err := ParseNotify(parseArgs(t, bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
