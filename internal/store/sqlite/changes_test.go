package sqlite

import (
	"context"
	"testing"

	"pimail/internal/store"
	"pimail/internal/store/storetest"
)

// TestChangesMigration: a database made before schema step 9 keeps its
// changes readable after the upgrade, and from then on only messages whose
// MODSEQ moved on after their creation are in the (mailbox_id, modseq)
// index.
func TestChangesMigration(t *testing.T) {
	dir := t.TempDir()
	orig := migrations
	t.Cleanup(func() { migrations, testSchema = orig, 0 })
	migrations, testSchema = orig[:8], 8
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	deliver := func(s *Store, subject string) store.Delivered {
		t.Helper()
		d, err := s.Deliver(ctx, store.Delivery{Raw: []byte("Subject: " + subject + "\r\n\r\nbody\r\n"),
			Recipients: []store.Recipient{{AccountID: a.ID}}})
		if err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		return d[0]
	}
	flag := func(s *Store, mailboxID int64, uid uint32) {
		t.Helper()
		if _, err := s.StoreFlags(ctx, mailboxID, store.UIDSet{{Start: uid, Stop: uid}}, store.FlagsAdd, store.FlagSeen, nil); err != nil {
			t.Fatalf("StoreFlags: %v", err)
		}
	}
	for _, subj := range []string{"one", "two", "three"} {
		deliver(s, subj)
	}
	inbox := deliver(s, "four").MailboxID
	flag(s, inbox, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	migrations, testSchema = orig, 0
	s, err = Open(dir, testOptions())
	if err != nil {
		t.Fatalf("Open after upgrade: %v", err)
	}
	defer s.Close()
	indexed := func(want int) {
		t.Helper()
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM mail INDEXED BY mail_modseq
			WHERE mailbox_id = ? AND modseq <> created_modseq`, inbox).Scan(&n); err != nil || n != want {
			t.Fatalf("rows in the modseq index = %d, %v; want %d", n, err, want)
		}
	}
	indexed(4) // every row from before the upgrade
	storetest.CheckChanges(t, s, inbox)
	deliver(s, "five")
	deliver(s, "six")
	indexed(4)
	flag(s, inbox, 5)
	flag(s, inbox, 3)
	indexed(5)
	deliver(s, "seven")
	storetest.CheckChanges(t, s, inbox)
}
