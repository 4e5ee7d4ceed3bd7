package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

func blobDataRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow("SELECT count(*) FROM blob_data").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInlineBlobs: a message up to InlineMax is kept in the database and
// has no file; a bigger one has its file; both read back whole, and the
// database copy goes with the last reference.
func TestInlineBlobs(t *testing.T) {
	o := testOptions()
	o.InlineMax = 4096
	s := openWith(t, o)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	b := mustAccount(t, s, "v@example.org")
	small := testMsg(1)
	large := []byte("Subject: large\r\n\r\n" + strings.Repeat("0123456789abcdef", 400) + "\r\n")
	for _, raw := range [][]byte{small, large} {
		if _, err := s.Deliver(ctx, store.Delivery{Raw: raw, Recipients: []store.Recipient{{AccountID: a.ID}, {AccountID: b.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(s.blobPath(hashRaw(small))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a %d-byte message has a file (%v); want it in the database", len(small), err)
	}
	if _, err := os.Stat(s.blobPath(hashRaw(large))); err != nil {
		t.Errorf("a %d-byte message over InlineMax has no file: %v", len(large), err)
	}
	if n := blobDataRows(t, s); n != 1 {
		t.Errorf("%d rows in blob_data, want 1 (one copy for two recipients)", n)
	}
	msgs, err := s.UIDs(ctx, inboxOf(t, s, a).ID)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("Messages: %d, %v", len(msgs), err)
	}
	for i, want := range [][]byte{small, large} {
		got, err := s.ReadBlob(ctx, msgs[i].BlobID)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadBlob %d: %d bytes, %v; want the %d bytes delivered", i, len(got), err, len(want))
		}
		rc, size, err := s.OpenBlob(ctx, msgs[i].BlobID)
		if err != nil {
			t.Fatalf("OpenBlob %d: %v", i, err)
		}
		if _, err := rc.Seek(10, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		rest, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || size != int64(len(want)) || !bytes.Equal(rest, want[10:]) {
			t.Errorf("OpenBlob %d: size %d, %d bytes after Seek, %v", i, size, len(rest), err)
		}
	}
	// The full-text index and SEARCH read the message from the database.
	if err := s.WaitIndexed(ctx); err != nil {
		t.Fatal(err)
	}
	for _, mb := range []int64{inboxOf(t, s, a).ID, inboxOf(t, s, b).ID} {
		if _, err := s.StoreFlags(ctx, mb, nil, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Expunge(ctx, mb, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	if n := blobDataRows(t, s); n != 0 {
		t.Errorf("%d rows left in blob_data after the last reference went", n)
	}
	if _, err := s.ReadBlob(ctx, msgs[0].BlobID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReadBlob of a collected message: %v, want ErrNotFound", err)
	}
}

// TestInlineSharesOlderFile: a message stored as a file by an older
// version (or a larger InlineMax) and delivered again is shared, not
// copied into the database; when its file is gone, the new copy is kept.
func TestInlineSharesOlderFile(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, fileOptions())
	if err != nil {
		t.Fatal(err)
	}
	a := mustAccount(t, s, "u@example.org")
	if _, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(1), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(2), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// testMsg(2)'s file is lost (as if collected): the delivery keeps its bytes.
	if err := os.Remove(s.blobPath(hashRaw(testMsg(2)))); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2} {
		if _, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(n), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	var blobs int
	if err := s.rdb.QueryRow("SELECT count(*) FROM blobs").Scan(&blobs); err != nil || blobs != 2 {
		t.Fatalf("%d blob rows, %v; want 2 (shared)", blobs, err)
	}
	if n := blobDataRows(t, s); n != 1 {
		t.Errorf("%d rows in blob_data, want 1 (only the message whose file was gone)", n)
	}
	msgs, err := s.UIDs(ctx, inboxOf(t, s, a).ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if _, err := s.ReadBlob(ctx, m.BlobID); err != nil {
			t.Errorf("ReadBlob uid %d: %v", m.UID, err)
		}
	}
}

// TestInlineSnapshotAndVerify: a snapshot of a store whose messages are in
// the database carries them, and verify checks their content too.
func TestInlineSnapshotAndVerify(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	deliverN(t, s, a, 0, 3)
	out := filepath.Join(t.TempDir(), "snap")
	if _, err := s.Snapshot(ctx, out, SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyDir(ctx, out)
	if err != nil || len(rep.Problems) != 0 || rep.Blobs != 3 {
		t.Fatalf("verify of the snapshot: %+v, %v", rep, err)
	}
	c, err := Open(out, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.UIDs(ctx, inboxOf(t, c, a).ID)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("snapshot messages: %d, %v", len(msgs), err)
	}
	for i, m := range msgs {
		if got, err := c.ReadBlob(ctx, m.BlobID); err != nil || !bytes.Equal(got, testMsg(i)) {
			t.Errorf("snapshot message %d: %q, %v", i, got, err)
		}
	}
	c.Close()

	// Damage one message's bytes in the database.
	if err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec("UPDATE blob_data SET raw = 'tampered' WHERE blob_id = (SELECT id FROM blobs WHERE sha256 = ?)", hashRaw(testMsg(1)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rep, err = VerifyDir(ctx, s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "damaged") {
		t.Errorf("verify after damaging a message in the database: %q, want one problem saying it is damaged", rep.Problems)
	}
}

// TestInlineSearchDuringFullPool: SEARCH BODY reads messages kept in the
// database while every connection of the read pool is held by other
// searches (each holding its read transaction): they must not wait for
// each other.
func TestInlineSearchDuringFullPool(t *testing.T) {
	o := testOptions()
	o.ReadConns = 2
	s := openWith(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := mustAccount(t, s, "u@example.org")
	deliverN(t, s, a, 0, 40)
	mb := inboxOf(t, s, a).ID
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			res, err := s.Search(ctx, mb, store.SearchQuery{Op: store.SearchBody, Text: "body 1"})
			if err == nil && len(res.UIDs) != 11 { // 1 and 10-19
				err = fmt.Errorf("%d results, want 11", len(res.UIDs))
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("search: %v", err)
		}
	}
}
