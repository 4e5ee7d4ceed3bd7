package sqlite

import (
	"context"
	"testing"

	"pimail/internal/store"
)

// TestObjectIDMigration: a database made before schema step 15 keeps its
// mailbox and blob IDs (IMAP's MAILBOXID and EMAILID), and from the
// upgrade on new ones are above every ID in use and never handed out
// twice, also after the newest mailbox is deleted.
func TestObjectIDMigration(t *testing.T) {
	dir := t.TempDir()
	orig := migrations
	t.Cleanup(func() { migrations, testSchema = orig, 0 })
	migrations, testSchema = orig[:14], 14
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	if _, err := s.CreateMailbox(ctx, a.ID, "Old", store.SpecialNone); err != nil {
		t.Fatal(err)
	}
	d, err := s.Deliver(ctx, store.Delivery{Raw: []byte("Subject: old\r\n\r\nbody\r\n"), Recipients: []store.Recipient{{AccountID: a.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.Mailboxes(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	blob := func(s *Store) int64 {
		t.Helper()
		ms, err := s.UIDs(ctx, d[0].MailboxID)
		if err != nil || len(ms) == 0 {
			t.Fatalf("UIDs: %v %v", ms, err)
		}
		return ms[0].BlobID
	}
	oldBlob := blob(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	migrations, testSchema = orig, 0
	s, err = Open(dir, testOptions())
	if err != nil {
		t.Fatalf("Open after upgrade: %v", err)
	}
	defer s.Close()
	after, err := s.Mailboxes(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var maxID int64
	for i, m := range before {
		if after[i].ID != m.ID || after[i].Name != m.Name {
			t.Fatalf("mailbox %q had ID %d, has %+v after the upgrade", m.Name, m.ID, after[i])
		}
		maxID = max(maxID, m.ID)
	}
	if got := blob(s); got != oldBlob {
		t.Fatalf("message's blob ID %d became %d", oldBlob, got)
	}
	y, err := s.CreateMailbox(ctx, a.ID, "Y", store.SpecialNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMailbox(ctx, a.ID, "Y"); err != nil {
		t.Fatal(err)
	}
	z, err := s.CreateMailbox(ctx, a.ID, "Z", store.SpecialNone)
	if err != nil {
		t.Fatal(err)
	}
	if y.ID <= maxID || z.ID <= y.ID {
		t.Fatalf("IDs after the upgrade: Y %d, Z %d (highest before %d)", y.ID, z.ID, maxID)
	}
	d2, err := s.Deliver(ctx, store.Delivery{Raw: []byte("Subject: new\r\n\r\nbody\r\n"), Recipients: []store.Recipient{{AccountID: a.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.UIDs(ctx, d2[0].MailboxID)
	if err != nil || len(ms) != 2 || ms[1].BlobID <= oldBlob {
		t.Fatalf("new message's blob after the upgrade: %+v %v (old blob %d)", ms, err, oldBlob)
	}
}
