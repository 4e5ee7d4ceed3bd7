package sqlite

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pimail/internal/store"
)

// expungeState reads what an expunge leaves behind for the collector.
func expungeState(t *testing.T, s *Store, accountID int64) (used, releases, holds int64) {
	t.Helper()
	if _, u, err := s.Quota(context.Background(), accountID); err != nil {
		t.Fatalf("Quota: %v", err)
	} else {
		used = u
	}
	if err := s.rdb.QueryRow("SELECT (SELECT count(*) FROM blob_release), (SELECT count(*) FROM usage_hold)").Scan(&releases, &holds); err != nil {
		t.Fatal(err)
	}
	return used, releases, holds
}

func blobRefcount(t *testing.T, s *Store, raw []byte) (int64, bool) {
	t.Helper()
	var n int64
	err := s.rdb.QueryRow("SELECT refcount FROM blobs WHERE sha256 = ?", hashRaw(raw)).Scan(&n)
	if err != nil {
		return 0, false
	}
	return n, true
}

// TestExpungeReleasesInBackground: an expunge lowers the account's usage
// at once (one sum over the rows, the per-row trigger held off) but leaves
// the blob reference counts to the collector (blob_release); verify counts
// the pending releases, and the collector then frees exactly the blobs no
// row holds any more.
func TestExpungeReleasesInBackground(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	raw1, raw2, raw3 := testMsg(1), testMsg(2), testMsg(3)
	ds, err := s.Deliver(ctx, store.Delivery{Raw: raw1, Recipients: []store.Recipient{{AccountID: a.ID}, {AccountID: a.ID, Mailbox: "Archive"}}})
	if err != nil {
		t.Fatal(err)
	}
	inbox := ds[0].MailboxID
	var uids []uint32
	uids = append(uids, ds[0].UID)
	for _, raw := range [][]byte{raw2, raw3, raw3} { // raw3 twice: one blob, two rows
		d, err := s.Append(ctx, inbox, raw, 0, nil, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, d.UID)
	}
	if used, rel, _ := expungeState(t, s, a.ID); used != int64(2*len(raw1)+len(raw2)+2*len(raw3)) || rel != 0 {
		t.Fatalf("before: used %d, releases %d", used, rel)
	}

	// Expunge raw1's INBOX copy and both raw3 rows; raw2 stays.
	expungeUIDs(t, s, inbox, uids[0], uids[2], uids[3])
	used, rel, holds := expungeState(t, s, a.ID)
	if want := int64(len(raw1) + len(raw2)); used != want {
		t.Errorf("used after expunge = %d, want %d (Archive's raw1 and raw2)", used, want)
	}
	if rel != 3 || holds != 0 {
		t.Errorf("after expunge: %d releases, %d usage holds; want 3 and 0", rel, holds)
	}
	if n, ok := blobRefcount(t, s, raw3); !ok || n != 2 {
		t.Errorf("raw3 refcount before the collector = %d, %v; want 2 (released in the background)", n, ok)
	}
	rep := verifyClean(t, s.Dir())
	if rep.Pending != 1 || rep.MailRows != 2 {
		t.Errorf("verify before the collector: %+v, want 1 pending blob (raw3) and 2 mail rows", rep)
	}
	ch, err := s.Changes(ctx, inbox, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Expunged) != 3 || ch.Expunged[0] != uids[0] || ch.Expunged[1] != uids[2] || ch.Expunged[2] != uids[3] {
		t.Errorf("Changes expunged %v, want %v %v %v", ch.Expunged, uids[0], uids[2], uids[3])
	}

	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	if _, rel, _ := expungeState(t, s, a.ID); rel != 0 {
		t.Errorf("releases after the collector: %d, want 0", rel)
	}
	if n, ok := blobRefcount(t, s, raw1); !ok || n != 1 {
		t.Errorf("raw1 refcount = %d, %v; want 1 (the Archive copy)", n, ok)
	}
	if n, ok := blobRefcount(t, s, raw2); !ok || n != 1 {
		t.Errorf("raw2 refcount = %d, %v; want 1", n, ok)
	}
	if _, ok := blobRefcount(t, s, raw3); ok {
		t.Errorf("raw3's blob survived the collector")
	}
	if rep := verifyClean(t, s.Dir()); rep.Pending != 0 || rep.MailRows != 2 || rep.Blobs != 2 {
		t.Errorf("verify after the collector: %+v, want 2 blobs, 2 mail rows, none pending", rep)
	}
}

// TestExpungeThenRedeliver: content delivered again after its expunge and
// before the collector keeps its blob (the pending release and the new
// reference both count).
func TestExpungeThenRedeliver(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	ds := deliverN(t, s, a, 7, 1)
	expungeUIDs(t, s, ds[0].MailboxID, ds[0].UID)
	again := deliverN(t, s, a, 7, 1)
	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	if n, ok := blobRefcount(t, s, testMsg(7)); !ok || n != 1 {
		t.Fatalf("refcount after expunge, delivery, collection = %d, %v; want 1", n, ok)
	}
	ms, err := s.Fetch(ctx, again[0].MailboxID, store.UIDSet{{Start: again[0].UID, Stop: again[0].UID}}, store.FetchOptions{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Fetch of the new delivery: %v, %v", ms, err)
	}
	if _, used, err := s.Quota(ctx, a.ID); err != nil || used != int64(len(testMsg(7))) {
		t.Errorf("used = %d, %v; want %d", used, err, len(testMsg(7)))
	}
	verifyClean(t, s.Dir())
}

// TestMoveAndDeleteKeepUsage: MOVE goes through the same expunge (usage
// unchanged, one release), and deleting a mailbox, which does not hold
// the trigger, still lowers the usage row by row.
func TestMoveAndDeleteKeepUsage(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	ds := deliverN(t, s, a, 0, 3)
	inbox := ds[0].MailboxID
	arch, err := s.CreateMailbox(ctx, a.ID, "Moved", "")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(len(testMsg(0)) + len(testMsg(1)) + len(testMsg(2)))
	if _, err := s.Move(ctx, inbox, store.UIDSet{{Start: ds[0].UID, Stop: ds[1].UID}}, arch.ID); err != nil {
		t.Fatal(err)
	}
	if used, rel, holds := expungeState(t, s, a.ID); used != total || rel != 2 || holds != 0 {
		t.Errorf("after MOVE: used %d (want %d), releases %d (want 2), holds %d", used, total, rel, holds)
	}
	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if n, ok := blobRefcount(t, s, testMsg(i)); !ok || n != 1 {
			t.Errorf("message %d refcount after MOVE and collection = %d, %v; want 1", i, n, ok)
		}
	}
	if err := s.DeleteMailbox(ctx, a.ID, "Moved"); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := expungeState(t, s, a.ID); used != int64(len(testMsg(2))) {
		t.Errorf("used after deleting Moved = %d, want %d", used, len(testMsg(2)))
	}
	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	verifyClean(t, s.Dir())
}

// TestReleaseBatches: more releases than one request applies all go in
// one collector pass.
func TestReleaseBatches(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	ds := deliverN(t, s, a, 0, 5)
	// Extra references, as many as their releases: the counts end where they began.
	err := s.write(ctx, func(w *wtx) error {
		for i := range releaseBatch*2 + 10 {
			b := hashRaw(testMsg(i % 5))
			if _, err := w.exec("UPDATE blobs SET refcount = refcount + 1 WHERE sha256 = ?", b); err != nil {
				return err
			}
			if _, err := w.exec("INSERT INTO blob_release (blob_id) SELECT id FROM blobs WHERE sha256 = ?", b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	if _, rel, _ := expungeState(t, s, a.ID); rel != 0 {
		t.Errorf("releases left after one pass: %d", rel)
	}
	for i := range ds {
		if n, ok := blobRefcount(t, s, testMsg(i)); !ok || n != 1 {
			t.Errorf("message %d refcount = %d, %v; want 1", i, n, ok)
		}
	}
	verifyClean(t, s.Dir())
}

// TestUIDExpungeSets: UID EXPUNGE (RFC 4315 §2.1) removes exactly the
// messages both in the set and flagged \Deleted, whether the set is small
// enough for one DELETE (up to 32 ranges) or listed first.
func TestUIDExpungeSets(t *testing.T) {
	for _, ranges := range []int{3, 40} {
		t.Run(fmt.Sprint(ranges), func(t *testing.T) {
			s := openTest(t)
			ctx := context.Background()
			a := mustAccount(t, s, "u@example.org")
			ds := deliverN(t, s, a, 0, 100)
			mb := ds[0].MailboxID
			var odd store.UIDSet
			for i := 1; i < 100; i += 2 {
				odd = append(odd, store.UIDRange{Start: ds[i].UID, Stop: ds[i].UID})
			}
			if _, err := s.StoreFlags(ctx, mb, odd, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
				t.Fatal(err)
			}
			// Ranges of two messages each, every other pair: [0,1], [4,5], ...
			var set store.UIDSet
			var want []uint32
			for r := 0; r < ranges; r++ {
				i := 4 * r % 100
				set = append(set, store.UIDRange{Start: ds[i].UID, Stop: ds[i+1].UID})
				if !slices.Contains(want, ds[i+1].UID) {
					want = append(want, ds[i+1].UID)
				}
			}
			slices.Sort(want)
			got, err := s.Expunge(ctx, mb, set)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("expunged %v, want %v", got, want)
			}
			left, err := s.Fetch(ctx, mb, nil, store.FetchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 100-len(want) {
				t.Errorf("%d messages left, want %d", len(left), 100-len(want))
			}
			var size int64
			for i, d := range ds {
				if !slices.Contains(want, d.UID) {
					size += int64(len(testMsg(i)))
				}
			}
			if _, used, err := s.Quota(ctx, a.ID); err != nil || used != size {
				t.Errorf("used %d, %v; want %d", used, err, size)
			}
		})
	}
}

// TestExpungeUsageWithoutNarrowRow: the usage an expunge subtracts comes
// from blobs when a blob has no blob_fetch row (an undecodable parse).
func TestExpungeUsageWithoutNarrowRow(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	ds := deliverN(t, s, a, 0, 3)
	err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec("DELETE FROM blob_fetch WHERE blob_id IN (SELECT id FROM blobs WHERE sha256 = ?)", hashRaw(testMsg(1)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	expungeUIDs(t, s, ds[0].MailboxID, ds[0].UID, ds[1].UID)
	if _, used, err := s.Quota(ctx, a.ID); err != nil || used != int64(len(testMsg(2))) {
		t.Errorf("used = %d, %v; want %d", used, err, len(testMsg(2)))
	}
}
