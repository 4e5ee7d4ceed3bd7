package storetest

import (
	"testing"
	"time"

	"pimail/internal/store"
)

// testObjectIDs checks the rules of store/doc.go's "Identifiers" that
// IMAP's OBJECTID (RFC 8474) rests on: a mailbox keeps its ID through a
// rename; a mailbox ID and a blob ID are never handed out again, also
// after the row with the highest ID is gone; COPY and MOVE keep the
// BlobID; SearchBlobID finds the messages of one blob.
func testObjectIDs(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	acct := f.accounts[0].ID
	a, err := s.CreateMailbox(c, acct, "A", store.SpecialNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RenameMailbox(c, acct, "A", "A2"); err != nil {
		t.Fatal(err)
	}
	if got := f.mailbox(t, 0, "A2"); got.ID != a.ID {
		t.Fatalf("renamed mailbox has ID %d, was %d", got.ID, a.ID)
	}
	b, err := s.CreateMailbox(c, acct, "B", store.SpecialNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMailbox(c, acct, "B"); err != nil {
		t.Fatal(err)
	}
	b2, err := s.CreateMailbox(c, acct, "B", store.SpecialNone)
	if err != nil {
		t.Fatal(err)
	}
	if b2.ID == b.ID || b2.ID == a.ID {
		t.Fatalf("mailbox created after deleting the newest got ID %d again (had %d, %d)", b2.ID, a.ID, b.ID)
	}

	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 2)
	ms := fetchAll(t, s, inbox.ID)
	old := ms[1].BlobID
	// Expunge the newest blob's message and wait for the blob to go.
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: ms[1].UID, Stop: ms[1].UID}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expunge(c, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := s.ReadBlob(c, old); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("blob %d not collected after its message was expunged", old)
		}
	}
	f.appendN(t, inbox, 10, 1)
	ms = fetchAll(t, s, inbox.ID)
	if ms[1].BlobID == old || ms[1].BlobID == ms[0].BlobID {
		t.Fatalf("new content got blob ID %d again", ms[1].BlobID)
	}

	// COPY and MOVE keep the BlobID; SearchBlobID finds each copy.
	if _, err := s.Copy(c, inbox.ID, store.UIDSet{{Start: ms[0].UID, Stop: ms[0].UID}}, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Move(c, inbox.ID, store.UIDSet{{Start: ms[1].UID, Stop: ms[1].UID}}, a.ID); err != nil {
		t.Fatal(err)
	}
	in2 := fetchAll(t, s, a.ID)
	if len(in2) != 2 || in2[0].BlobID != ms[0].BlobID || in2[1].BlobID != ms[1].BlobID {
		t.Fatalf("after COPY and MOVE: %+v, source blobs %d, %d", in2, ms[0].BlobID, ms[1].BlobID)
	}
	for _, mb := range []int64{inbox.ID, a.ID} {
		r, err := s.Search(c, mb, store.SearchQuery{Op: store.SearchBlobID, Num: ms[0].BlobID})
		if err != nil || len(r.UIDs) != 1 {
			t.Fatalf("SearchBlobID %d in mailbox %d: %+v %v", ms[0].BlobID, mb, r, err)
		}
	}
	if r, err := s.Search(c, inbox.ID, store.SearchQuery{Op: store.SearchBlobID, Num: ms[1].BlobID}); err != nil || len(r.UIDs) != 0 {
		t.Fatalf("SearchBlobID of a moved message in its old mailbox: %+v %v", r, err)
	}
}
