package storetest

import (
	"slices"
	"testing"

	"pimail/internal/store"
)

func testDefaultMailboxes(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	mbs, err := s.Mailboxes(c, f.accounts[0].ID)
	if err != nil {
		t.Fatalf("Mailboxes: %v", err)
	}
	if len(mbs) != len(store.DefaultMailboxes) {
		t.Fatalf("Mailboxes = %+v, want the %d defaults", mbs, len(store.DefaultMailboxes))
	}
	byName := map[string]store.Mailbox{}
	seenUV := map[uint32]bool{}
	for _, m := range mbs {
		byName[m.Name] = m
		if m.UIDValidity == 0 || seenUV[m.UIDValidity] {
			t.Errorf("mailbox %q: UIDVALIDITY %d zero or not unique", m.Name, m.UIDValidity)
		}
		seenUV[m.UIDValidity] = true
		if m.UIDNext != 1 || m.AccountID != f.accounts[0].ID || !m.Subscribed {
			t.Errorf("mailbox %+v: want UIDNext 1, the account, subscribed", m)
		}
	}
	for _, d := range store.DefaultMailboxes {
		m, ok := byName[d.Name]
		if !ok || m.SpecialUse != d.SpecialUse {
			t.Errorf("default mailbox %q (%q) missing or wrong: %+v", d.Name, d.SpecialUse, m)
		}
	}
	for _, n := range []string{"inbox", "InBoX", "INBOX"} {
		m, err := s.Mailbox(c, f.accounts[0].ID, n)
		if err != nil || m.ID != byName["INBOX"].ID || m.Name != "INBOX" {
			t.Errorf("Mailbox(%q) = %+v, %v; want INBOX", n, m, err)
		}
	}
	_, err = s.Mailbox(c, f.accounts[0].ID, "sent") // only INBOX is case-insensitive
	wantErr(t, "Mailbox(sent)", err, store.ErrNotFound)
	// Accounts are isolated: the other account's INBOX is another mailbox.
	if other := f.mailbox(t, 1, "INBOX"); other.ID == byName["INBOX"].ID {
		t.Fatalf("two accounts share INBOX %d", other.ID)
	}
}

func testCreateMailbox(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	acc := f.accounts[0].ID
	m, err := s.CreateMailbox(c, acc, "Lists/golang/nuts", "")
	if err != nil {
		t.Fatalf("CreateMailbox: %v", err)
	}
	if m.Name != "Lists/golang/nuts" || m.UIDNext != 1 || m.UIDValidity == 0 {
		t.Fatalf("CreateMailbox = %+v", m)
	}
	// Superior names are created too (RFC 9051 §6.3.4).
	names := mailboxNames(t, s, acc)
	for _, want := range []string{"Lists", "Lists/golang", "Lists/golang/nuts"} {
		if !slices.Contains(names, want) {
			t.Errorf("mailbox %q missing after CreateMailbox: %v", want, names)
		}
	}
	_, err = s.CreateMailbox(c, acc, "Lists/golang/nuts", "")
	wantErr(t, "CreateMailbox twice", err, store.ErrExists)
	_, err = s.CreateMailbox(c, acc, "inbox", "")
	wantErr(t, "CreateMailbox inbox", err, store.ErrExists)
	for _, bad := range []string{"", "/a", "a/", "a//b", "a\x00b", "tab\tname"} {
		_, err = s.CreateMailbox(c, acc, bad, "")
		wantErr(t, "CreateMailbox "+bad, err, store.ErrInvalid)
	}
	_, err = s.CreateMailbox(c, acc, "Weird", `\NotAThing`)
	wantErr(t, "CreateMailbox bad special-use", err, store.ErrInvalid)
	m2, err := s.CreateMailbox(c, acc, "Ünïcødé/日本", store.SpecialArchive)
	if err != nil || m2.SpecialUse != store.SpecialArchive {
		t.Fatalf("CreateMailbox unicode = %+v, %v", m2, err)
	}
	if got, err := s.Mailbox(c, acc, "Ünïcødé/日本"); err != nil || got.ID != m2.ID {
		t.Fatalf("Mailbox unicode = %+v, %v", got, err)
	}
	_, err = s.CreateMailbox(c, acc+1000, "X", "")
	wantErr(t, "CreateMailbox unknown account", err, store.ErrNotFound)
}

func testRenameMailbox(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	acc := f.accounts[0].ID
	for _, n := range []string{"a/x", "a/x/y", "ab", "b0"} {
		if _, err := s.CreateMailbox(c, acc, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	a := f.mailbox(t, 0, "a")
	ax := f.mailbox(t, 0, "a/x")
	uids := f.appendN(t, ax, 0, 2)

	if err := s.RenameMailbox(c, acc, "a", "b"); err != nil {
		t.Fatalf("RenameMailbox: %v", err)
	}
	names := mailboxNames(t, s, acc)
	for _, want := range []string{"b", "b/x", "b/x/y", "ab", "b0"} {
		if !slices.Contains(names, want) {
			t.Errorf("after rename: %q missing in %v", want, names)
		}
	}
	for _, gone := range []string{"a", "a/x", "a/x/y"} {
		if slices.Contains(names, gone) {
			t.Errorf("after rename: %q still there: %v", gone, names)
		}
	}
	// Same mailboxes (IDs, UIDVALIDITY, messages), new names.
	bx := f.mailbox(t, 0, "b/x")
	if bx.ID != ax.ID || bx.UIDValidity != ax.UIDValidity {
		t.Fatalf("renamed child = %+v, was %+v", bx, ax)
	}
	if b := f.mailbox(t, 0, "b"); b.ID != a.ID {
		t.Fatalf("renamed mailbox has ID %d, was %d", b.ID, a.ID)
	}
	if got := uidsOf(fetchAll(t, s, bx.ID)); !equalUIDs(got, uids) {
		t.Fatalf("messages after rename = %v, want %v", got, uids)
	}

	wantErr(t, "rename onto existing", s.RenameMailbox(c, acc, "b", "ab"), store.ErrExists)
	wantErr(t, "rename missing", s.RenameMailbox(c, acc, "nope", "z"), store.ErrNotFound)
	wantErr(t, "rename to INBOX", s.RenameMailbox(c, acc, "b", "inbox"), store.ErrExists)
	// Into a new hierarchy: superior names appear.
	if err := s.RenameMailbox(c, acc, "ab", "deep/er/ab"); err != nil {
		t.Fatalf("RenameMailbox into new hierarchy: %v", err)
	}
	names = mailboxNames(t, s, acc)
	for _, want := range []string{"deep", "deep/er", "deep/er/ab"} {
		if !slices.Contains(names, want) {
			t.Errorf("after rename: %q missing in %v", want, names)
		}
	}
}

func testRenameInbox(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	acc := f.accounts[0].ID
	for i := range 3 {
		f.deliver(t, i, 0)
	}
	inbox := f.mailbox(t, 0, "INBOX")
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 2}}, store.FlagsAdd, store.FlagFlagged, []string{"$Work"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateMailbox(c, acc, "INBOX/child", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.RenameMailbox(c, acc, "inbox", "Old Mail"); err != nil {
		t.Fatalf("RenameMailbox INBOX: %v", err)
	}
	// RFC 9051 §6.3.6: all messages move to the new mailbox, INBOX stays
	// (empty, same UIDVALIDITY, UIDNEXT not reset), its children stay.
	after := f.mailbox(t, 0, "INBOX")
	if after.ID != inbox.ID || after.UIDValidity != inbox.UIDValidity || after.UIDNext < inbox.UIDNext {
		t.Fatalf("INBOX after rename = %+v, before %+v", after, inbox)
	}
	if ms := fetchAll(t, s, after.ID); len(ms) != 0 {
		t.Fatalf("INBOX still has %d messages", len(ms))
	}
	old := f.mailbox(t, 0, "Old Mail")
	ms := fetchAll(t, s, old.ID)
	if len(ms) != 3 {
		t.Fatalf("Old Mail has %d messages, want 3", len(ms))
	}
	if ms[1].Flags&store.FlagFlagged == 0 || !slices.Equal(ms[1].Keywords, []string{"$Work"}) {
		t.Errorf("flags not kept by INBOX rename: %+v", ms[1])
	}
	if !slices.Contains(mailboxNames(t, s, acc), "INBOX/child") {
		t.Errorf("INBOX/child was moved by INBOX rename")
	}
	// Clients that had INBOX selected learn the messages are gone.
	ch, err := s.Changes(c, inbox.ID, inbox.HighestModSeq)
	if err != nil {
		t.Fatal(err)
	}
	if !equalUIDs(ch.Expunged, []uint32{1, 2, 3}) {
		t.Fatalf("INBOX Changes.Expunged = %v, want [1 2 3]", ch.Expunged)
	}
	// New mail still goes to INBOX, with a UID above the old ones.
	d := f.deliver(t, 9, 0)
	if d[0].MailboxID != inbox.ID || d[0].UID != 4 {
		t.Fatalf("delivery after INBOX rename = %+v, want INBOX UID 4", d[0])
	}
}

func testDeleteMailbox(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	acc := f.accounts[0].ID
	wantErr(t, "delete INBOX", s.DeleteMailbox(c, acc, "inbox"), store.ErrMailboxInUse)
	wantErr(t, "delete Trash (special-use)", s.DeleteMailbox(c, acc, "Trash"), store.ErrMailboxInUse)
	wantErr(t, "delete missing", s.DeleteMailbox(c, acc, "nope"), store.ErrNotFound)
	if _, err := s.CreateMailbox(c, acc, "p/c", ""); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete with children", s.DeleteMailbox(c, acc, "p"), store.ErrMailboxInUse)

	mb, err := s.CreateMailbox(c, acc, "Project", "")
	if err != nil {
		t.Fatal(err)
	}
	before := stats(t, s)
	f.appendN(t, mb, 0, 3)
	if st := stats(t, s); st.Messages != before.Messages+3 {
		t.Fatalf("Stats.Messages = %d, want %d", st.Messages, before.Messages+3)
	}
	if err := s.DeleteMailbox(c, acc, "Project"); err != nil {
		t.Fatalf("DeleteMailbox: %v", err)
	}
	if st := stats(t, s); st.Messages != before.Messages {
		t.Fatalf("Stats.Messages after delete = %d, want %d", st.Messages, before.Messages)
	}
	_, err = s.Mailbox(c, acc, "Project")
	wantErr(t, "Mailbox after delete", err, store.ErrNotFound)
	_, err = s.UIDs(c, mb.ID)
	wantErr(t, "UIDs of deleted mailbox", err, store.ErrNotFound)
	// A recreated name is a new mailbox: new UIDVALIDITY (RFC 9051 §2.3.1.1).
	again, err := s.CreateMailbox(c, acc, "Project", "")
	if err != nil {
		t.Fatal(err)
	}
	if again.UIDValidity == mb.UIDValidity || again.UIDNext != 1 {
		t.Fatalf("recreated mailbox %+v, old %+v: want new UIDVALIDITY, UIDNext 1", again, mb)
	}
	if err := s.DeleteMailbox(c, acc, "p/c"); err != nil {
		t.Fatalf("delete child: %v", err)
	}
	if err := s.DeleteMailbox(c, acc, "p"); err != nil {
		t.Fatalf("delete parent after child: %v", err)
	}
}

func testMailboxStatus(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 4)
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 1, Stop: 2}}, store.FlagsAdd, store.FlagSeen, nil); err != nil {
		t.Fatal(err)
	}
	st, err := s.MailboxStatus(c, f.accounts[0].ID, "inbox")
	if err != nil {
		t.Fatalf("MailboxStatus: %v", err)
	}
	var size int64
	for i := range 4 {
		size += int64(len(msg(i)))
	}
	if st.Messages != 4 || st.Unseen != 2 || st.Size != size || st.UIDNext != 5 || st.ID != inbox.ID {
		t.Fatalf("MailboxStatus = %+v, want 4 messages, 2 unseen, size %d, UIDNext 5", st, size)
	}
	_, err = s.MailboxStatus(c, f.accounts[0].ID, "nope")
	wantErr(t, "MailboxStatus missing", err, store.ErrNotFound)
}

func testRemoveAccount(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	f.deliver(t, 1, 0, 1)
	f.deliver(t, 2, 0)
	if err := s.RemoveAccount(c, f.accounts[0].Address); err != nil {
		t.Fatalf("RemoveAccount: %v", err)
	}
	st := stats(t, s)
	if st.Messages != 1 || st.Accounts != 1 {
		t.Fatalf("Stats after RemoveAccount = %+v, want 1 message, 1 account", st)
	}
	// The other account's copy of the shared message is intact.
	ms, err := s.Fetch(c, f.mailbox(t, 1, "INBOX").ID, nil, store.FetchOptions{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("other account's INBOX = %v, %v", ms, err)
	}
	raw, err := s.ReadBlob(c, ms[0].BlobID)
	if err != nil || string(raw) != string(msg(1)) {
		t.Fatalf("ReadBlob of shared message after RemoveAccount: %v", err)
	}
}
