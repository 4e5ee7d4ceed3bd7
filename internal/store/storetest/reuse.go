package storetest

import (
	"slices"
	"testing"

	"pimail/internal/store"
)

// testQueueIDsNotReused: an entry's ID is never handed out again, even
// after the entry with the highest ID is gone (two messages were both
// queue_id=1 in the delivery log before).
func testQueueIDsNotReused(t *testing.T, s store.Store) {
	c := ctx(t)
	setup(t, s, 1)
	seen := map[int64]bool{}
	var last int64
	for i := range 3 {
		e, err := s.Enqueue(c, queueEntry("a@remote.example"), msg(i))
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		if seen[e.ID] || e.ID <= last {
			t.Fatalf("entry %d got ID %d after %d (seen: %v)", i, e.ID, last, seen)
		}
		seen[e.ID], last = true, e.ID
		if err := s.DropQueueEntry(c, e.ID); err != nil {
			t.Fatalf("DropQueueEntry: %v", err)
		}
	}
}

// testRemoveAccountLeavesAliases: removing an account takes its address
// out of every alias; an alias that had only that target goes.
func testRemoveAccountLeavesAliases(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	gone, kept := f.accounts[0].Address, f.accounts[1].Address
	if err := s.AddAlias(c, "team@example.org", []string{gone, kept}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAlias(c, "solo@example.org", []string{gone}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveAccount(c, gone); err != nil {
		t.Fatal(err)
	}
	as, err := s.Aliases(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Address != "team@example.org" || !slices.Equal(as[0].Targets, []string{kept}) {
		t.Fatalf("aliases after removing %s: %+v", gone, as)
	}
}
