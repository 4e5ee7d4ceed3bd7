package storetest

import (
	"slices"
	"testing"

	"pimail/internal/store"
)

// testSubscriptions: subscriptions are names apart from the mailboxes
// (store/subscriptions.go): the default special-use mailboxes start
// subscribed, CREATE and DELETE leave subscriptions alone, a name may be
// subscribed without a mailbox, RENAME moves them with the mailbox.
func testSubscriptions(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	acc := f.accounts[0].ID
	subs := func(want ...string) {
		t.Helper()
		got, err := s.Subscriptions(c, acc)
		if err != nil {
			t.Fatalf("Subscriptions: %v", err)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("Subscriptions = %q, want %q", got, want)
		}
	}
	var defaults []string
	for _, mb := range store.DefaultMailboxes {
		defaults = append(defaults, mb.Name)
	}
	subs(defaults...)
	if m := f.mailbox(t, 0, "Sent"); !m.Subscribed {
		t.Fatalf("Sent not subscribed at account creation")
	}
	if _, err := s.CreateMailbox(c, acc, "Lists/go", store.SpecialNone); err != nil {
		t.Fatal(err)
	}
	subs(defaults...) // CREATE subscribes nothing
	if err := s.SetSubscribed(c, acc, "Sent", false); err != nil {
		t.Fatalf("SetSubscribed: %v", err)
	}
	if err := s.SetSubscribed(c, acc, "Sent", false); err != nil {
		t.Fatalf("SetSubscribed twice: %v", err)
	}
	if m := f.mailbox(t, 0, "Sent"); m.Subscribed {
		t.Fatalf("Sent still subscribed")
	}
	for _, n := range []string{"Lists/go", "Later/not-yet", "Lists/go"} {
		if err := s.SetSubscribed(c, acc, n, true); err != nil {
			t.Fatalf("SetSubscribed %q: %v", n, err)
		}
	}
	rest := slices.DeleteFunc(slices.Clone(defaults), func(n string) bool { return n == "Sent" })
	subs(append(rest, "Lists/go", "Later/not-yet")...)
	// The name subscribed before it existed is subscribed once created.
	m, err := s.CreateMailbox(c, acc, "Later/not-yet", store.SpecialNone)
	if err != nil || !m.Subscribed {
		t.Fatalf("CreateMailbox of a subscribed name = %+v, %v; want Subscribed", m, err)
	}
	if err := s.DeleteMailbox(c, acc, "Later/not-yet"); err != nil {
		t.Fatal(err)
	}
	subs(append(rest, "Lists/go", "Later/not-yet")...) // DELETE unsubscribes nothing
	if err := s.RenameMailbox(c, acc, "Lists", "Groups"); err != nil {
		t.Fatal(err)
	}
	subs(append(rest, "Groups/go", "Later/not-yet")...)
	wantErr(t, "SetSubscribed bad name", s.SetSubscribed(c, acc, "a//b", true), store.ErrInvalid)
	// Another account's subscriptions are its own.
	other, err := s.Subscriptions(c, f.accounts[1].ID)
	if err != nil || len(other) != len(defaults) {
		t.Fatalf("other account's subscriptions = %q, %v", other, err)
	}
}
