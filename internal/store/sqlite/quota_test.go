package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/storetest"
)

func TestQuotaSuite(t *testing.T) {
	storetest.RunQuota(t, func(t *testing.T) store.Store {
		s, err := Open(t.TempDir(), testOptions())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

// TestQuotaMigration: a database made before migration 4 gets its usage
// counted when it is upgraded.
func TestQuotaMigration(t *testing.T) {
	dir := t.TempDir()
	orig := migrations
	t.Cleanup(func() { migrations = orig })
	migrations = orig[:3]
	testSchema = 3
	t.Cleanup(func() { testSchema = 0 })
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	b := mustAccount(t, s, "v@example.org")
	raw1 := []byte("Subject: one\r\n\r\nfirst\r\n")
	raw2 := []byte("Subject: two\r\n\r\nthe second message\r\n")
	if _, err := s.Deliver(ctx, store.Delivery{Raw: raw1, Recipients: []store.Recipient{{AccountID: a.ID}, {AccountID: a.ID, Mailbox: "Archive"}, {AccountID: b.ID}}}); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if _, err := s.Deliver(ctx, store.Delivery{Raw: raw2, Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	migrations = orig
	testSchema = 0
	s2, err := Open(dir, testOptions())
	if err != nil {
		t.Fatalf("Open after upgrade: %v", err)
	}
	defer s2.Close()
	if _, used, err := s2.Quota(ctx, a.ID); err != nil || used != int64(2*len(raw1)+len(raw2)) {
		t.Fatalf("usage of a after migration = %d, %v; want %d", used, err, 2*len(raw1)+len(raw2))
	}
	if _, used, err := s2.Quota(ctx, b.ID); err != nil || used != int64(len(raw1)) {
		t.Fatalf("usage of b after migration = %d, %v; want %d", used, err, len(raw1))
	}
}

// sumUsage is the usage as a join over the account's messages: what Quota
// would cost without the counter.
const sumUsage = `SELECT coalesce(sum(b.size), 0) FROM mailboxes mb
	JOIN mail m ON m.mailbox_id = mb.id JOIN blobs b ON b.id = m.blob_id WHERE mb.account_id = ?`

// BenchmarkQuota compares the counter read (Quota) with the SUM it
// replaces, on an account with 20,000 messages.
func BenchmarkQuota(b *testing.B) {
	s, err := Open(b.TempDir(), testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		b.Fatal(err)
	}
	a, err := s.AddAccount(ctx, "u@example.org", "h")
	if err != nil {
		b.Fatal(err)
	}
	d, err := s.Deliver(ctx, store.Delivery{Raw: []byte("Subject: x\r\n\r\nbody\r\n"), Recipients: []store.Recipient{{AccountID: a.ID}}})
	if err != nil {
		b.Fatal(err)
	}
	const n = 20000
	start := time.Now()
	// Rows sharing the one blob, written straight in one transaction (the
	// triggers run for each): the index shape of a large mailbox.
	if _, err := s.wdb.ExecContext(ctx, fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 2 UNION ALL SELECT i+1 FROM c WHERE i < %d)
		INSERT INTO mail (mailbox_id, uid, modseq, flags, keywords, internal_date, blob_id)
		SELECT ?, i, i, 0, '', 0, (SELECT blob_id FROM mail WHERE mailbox_id = ? AND uid = 1) FROM c`, n+1), d[0].MailboxID, d[0].MailboxID); err != nil {
		b.Fatal(err)
	}
	b.Logf("inserted %d rows with the triggers in %v", n, time.Since(start))
	b.Run("counter", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.Quota(ctx, a.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sum", func(b *testing.B) {
		for b.Loop() {
			var used int64
			if err := s.rdb.QueryRowContext(ctx, sumUsage, a.ID).Scan(&used); err != nil {
				b.Fatal(err)
			}
		}
	})
}
