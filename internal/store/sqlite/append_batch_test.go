package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"pimail/internal/store"
)

// What AppendBatch does is checked by storetest (AppendBatch); these are
// the SQLite store's own cases.

// TestAppendBatchAllOrNothing: a batch whose second message fails inside
// the transaction (UID space exhausted) leaves nothing: no rows, no blobs,
// UIDNEXT unchanged (RFC 3502 §6.3.11).
func TestAppendBatchAllOrNothing(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	inbox := inboxOf(t, s, a)
	const last = 0xffffffff - 1
	if err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec("UPDATE mailboxes SET uidnext = ? WHERE id = ?", last, inbox.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err := s.AppendBatch(ctx, inbox.ID, []store.AppendMessage{{Raw: testMsg(1)}, {Raw: testMsg(2)}, {Raw: testMsg(3)}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("batch beyond the UID space: %v, want ErrInvalid", err)
	}
	st, err := s.MailboxStatus(ctx, a.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 0 || st.UIDNext != last {
		t.Fatalf("after the failed batch: %d messages, UIDNEXT %d; want 0 and %d", st.Messages, st.UIDNext, uint32(last))
	}
	var blobs int
	if err := s.rdb.QueryRow("SELECT count(*) FROM blobs").Scan(&blobs); err != nil || blobs != 0 {
		t.Fatalf("blob rows after the failed batch: %d, %v", blobs, err)
	}
	// One message still fits.
	if ds, err := s.AppendBatch(ctx, inbox.ID, []store.AppendMessage{{Raw: testMsg(1)}}); err != nil || ds[0].UID != last {
		t.Fatalf("batch of one: %+v, %v", ds, err)
	}
}

// TestAppendBatchCollectorRace: the collector removes the file of an
// unreferenced blob after the batch found it present; the batch writes it
// again, as a delivery does.
func TestAppendBatchCollectorRace(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	inbox := inboxOf(t, s, a)
	raw := testMsg(7)
	if _, err := s.Append(ctx, inbox.ID, raw, store.FlagDeleted, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expunge(ctx, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(s.blobPath(hashRaw(raw)))
	inFile := statErr == nil // small messages may be kept in the database
	calls := 0
	testHookBlobWritten = func() {
		calls++
		if calls == 1 {
			if err := s.collectOnce(); err != nil {
				t.Errorf("collect: %v", err)
			}
		}
	}
	defer func() { testHookBlobWritten = nil }()
	ds, err := s.AppendBatch(ctx, inbox.ID, []store.AppendMessage{{Raw: testMsg(8)}, {Raw: raw}})
	if err != nil {
		t.Fatal(err)
	}
	if inFile && calls != 2 {
		t.Fatalf("files written %d times, want 2 (the collector removed one)", calls)
	}
	ms, err := s.Fetch(ctx, inbox.ID, store.UIDSet{{Start: ds[0].UID, Stop: ds[1].UID}}, store.FetchOptions{})
	if err != nil || len(ms) != 2 {
		t.Fatalf("Fetch: %v %v", ms, err)
	}
	if got, err := s.ReadBlob(ctx, ms[1].BlobID); err != nil || string(got) != string(raw) {
		t.Fatalf("ReadBlob after the race: %v", err)
	}
}

// TestAppendBatchSearchBeforeIndexed: after a batch the indexer steps
// aside, and a full-text search right away still finds every message of
// the batch (the messages not yet indexed are read, search_text.go).
func TestAppendBatchSearchBeforeIndexed(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	inbox := inboxOf(t, s, a)
	var msgs []store.AppendMessage
	for i := range 50 {
		word := "plain"
		if i%5 == 0 {
			word = "zanzibarite"
		}
		msgs = append(msgs, store.AppendMessage{Raw: fmt.Appendf(nil, "From: a@example.net\r\nSubject: s%d\r\n\r\nbody %d %s\r\n", i, i, word)})
	}
	if _, err := s.AppendBatch(ctx, inbox.ID, msgs); err != nil {
		t.Fatal(err)
	}
	if s.busyUntil.Load() <= time.Now().Add(-time.Second).UnixNano() {
		t.Fatalf("the indexer was not asked to step aside after a batch")
	}
	res, err := s.Search(ctx, inbox.ID, store.SearchQuery{Op: store.SearchText, Text: "ZANZIBARITE"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.UIDs) != 10 {
		t.Fatalf("TEXT search right after the batch: %v, want the 10 UIDs 1, 6, …, 46", res.UIDs)
	}
	for i, u := range res.UIDs {
		if u != uint32(1+5*i) {
			t.Fatalf("TEXT search right after the batch: %v", res.UIDs)
		}
	}
}
