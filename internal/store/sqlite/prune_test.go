package sqlite

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"pimail/internal/store"
)

// TestTombstonePrune: beyond tombstoneLimit the oldest expunge tombstones
// are pruned; Changes since a MODSEQ below the pruned ones reports every
// missing UID (RFC 7162 §3.2.5.2), and since a later one exactly the
// expunges after it.
func TestTombstonePrune(t *testing.T) {
	old := tombstoneLimit
	tombstoneLimit = 4
	t.Cleanup(func() { tombstoneLimit = old })
	ctx := context.Background()
	s, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := mustAccount(t, s, "prune@example.org")
	for i := range 12 {
		raw := fmt.Appendf(nil, "Subject: m%d\r\n\r\nbody %d\r\n", i, i)
		if _, err := s.Deliver(ctx, store.Delivery{Raw: raw, Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	mb := mustInbox(t, s, a.ID)
	expunge := func(uids ...uint32) uint64 {
		t.Helper()
		var set store.UIDSet
		for _, u := range uids {
			set = append(set, store.UIDRange{Start: u, Stop: u})
		}
		if _, err := s.StoreFlags(ctx, mb, set, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.Expunge(ctx, mb, nil)
		if err != nil || !slices.Equal(got, uids) {
			t.Fatalf("Expunge = %v, %v; want %v", got, err, uids)
		}
		ch, err := s.Changes(ctx, mb, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ch.HighestModSeq
	}
	start, err := s.Changes(ctx, mb, 0)
	if err != nil {
		t.Fatal(err)
	}
	expunge(2, 3)
	expunge(5)
	before := expunge(7, 8)
	expunge(10, 11) // 7 tombstones > 4: pruned to the newest 2
	var n, floor int64
	if err := s.rdb.QueryRow("SELECT (SELECT count(*) FROM expunged WHERE mailbox_id = ?), (SELECT expunged_floor FROM mailboxes WHERE id = ?)", mb, mb).Scan(&n, &floor); err != nil {
		t.Fatal(err)
	}
	if n > 4 || floor == 0 {
		t.Fatalf("after pruning: %d tombstones, floor %d", n, floor)
	}
	ch, err := s.Changes(ctx, mb, start.HighestModSeq)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{2, 3, 5, 7, 8, 10, 11}; !slices.Equal(ch.Expunged, want) {
		t.Fatalf("Changes below the floor: expunged %v, want every missing UID %v", ch.Expunged, want)
	}
	ch, err = s.Changes(ctx, mb, before)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{10, 11}; !slices.Equal(ch.Expunged, want) {
		t.Fatalf("Changes above the floor: expunged %v, want %v", ch.Expunged, want)
	}
	// A new message after the pruning is not reported as missing.
	if _, err := s.Deliver(ctx, store.Delivery{Raw: []byte("Subject: new\r\n\r\nx\r\n"), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
		t.Fatal(err)
	}
	ch, err = s.Changes(ctx, mb, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{2, 3, 5, 7, 8, 10, 11}; !slices.Equal(ch.Expunged, want) {
		t.Fatalf("Changes since 0: expunged %v, want %v", ch.Expunged, want)
	}
}
