package sqlite

import (
	"context"
	"testing"

	"pimail/internal/store"
)

// countNarrow returns the rows of blobs, blob_fetch, blob_addrs and
// blob_headers.
func countNarrow(t *testing.T, s *Store) [4]int {
	t.Helper()
	var n [4]int
	if err := s.rdb.QueryRow(`SELECT (SELECT count(*) FROM blobs), (SELECT count(*) FROM blob_fetch),
		(SELECT count(*) FROM blob_addrs), (SELECT count(*) FROM blob_headers)`).Scan(&n[0], &n[1], &n[2], &n[3]); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNarrowRowsCollected: the narrow rows of a blob go with it when the
// collector removes it after the last expunge.
func TestNarrowRowsCollected(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := mustAccount(t, s, "narrow@example.org")
	for _, raw := range []string{"Subject: a\r\n\r\none\r\n", "Subject: b\r\n\r\ntwo\r\n"} {
		if _, err := s.Deliver(ctx, store.Delivery{Raw: []byte(raw), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := countNarrow(t, s); n != [4]int{2, 2, 2, 2} {
		t.Fatalf("after delivery: blobs, blob_fetch, blob_addrs, blob_headers = %v", n)
	}
	mb := mustInbox(t, s, a.ID)
	if _, err := s.StoreFlags(ctx, mb, store.UIDSet{{Start: 1, Stop: 1}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Expunge(ctx, mb, nil); err != nil || len(got) != 1 {
		t.Fatalf("Expunge = %v, %v", got, err)
	}
	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	if n := countNarrow(t, s); n != [4]int{1, 1, 1, 1} {
		t.Fatalf("after collection: blobs, blob_fetch, blob_addrs, blob_headers = %v", n)
	}
}

// TestMigrationUndecodableParse: a stored parse that cannot be decoded
// does not stop the upgrade; that blob just gets no blob_fetch row.
func TestMigrationUndecodableParse(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	orig := migrations
	migrations, testSchema = orig[:4], 4
	defer func() { migrations, testSchema = orig, 0 }()
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	a := mustAccount(t, s, "undecodable@example.org")
	var ids []int64
	for _, raw := range []string{"Subject: a\r\n\r\none\r\n", "Subject: b\r\n\r\ntwo\r\n"} {
		d, err := s.Deliver(ctx, store.Delivery{Raw: []byte(raw), Recipients: []store.Recipient{{AccountID: a.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		metas, err := s.Fetch(ctx, d[0].MailboxID, store.UIDSet{{Start: d[0].UID, Stop: d[0].UID}}, store.FetchOptions{})
		if err != nil || len(metas) != 1 {
			t.Fatal(err)
		}
		ids = append(ids, metas[0].BlobID)
	}
	if err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`UPDATE blobs SET parsed = '{"env":{"from":[{' WHERE id = ?`, ids[1])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	migrations, testSchema = orig, 0
	if s, err = Open(dir, testOptions()); err != nil {
		t.Fatalf("Open after upgrade: %v", err)
	}
	defer s.Close()
	if n := countNarrow(t, s); n[0] != 2 || n[1] != 1 || n[2] != 2 {
		t.Fatalf("after migration: blobs, blob_fetch, blob_addrs, blob_headers = %v", n)
	}
	var id int64
	if err := s.rdb.QueryRow("SELECT blob_id FROM blob_fetch").Scan(&id); err != nil || id != ids[0] {
		t.Fatalf("blob_fetch row for blob %d (%v), want %d", id, err, ids[0])
	}
}
