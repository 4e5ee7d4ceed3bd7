package sqlite

import (
	"context"
	"testing"
	"time"
)

// MailboxPage and MailboxCounts are checked by storetest (MailboxPage).

// BenchmarkMailboxPage is the first page (50 rows) of a 500-message mailbox.
func BenchmarkMailboxPage(b *testing.B) {
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
	inbox, err := s.Mailbox(ctx, a.ID, "INBOX")
	if err != nil {
		b.Fatal(err)
	}
	for i := range 500 {
		if _, err := s.Append(ctx, inbox.ID, benchMsg(int64(i)), 0, nil, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("page", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if p, err := s.MailboxPage(ctx, inbox.ID, 0, 50); err != nil || len(p) != 50 {
				b.Fatal(len(p), err)
			}
		}
	})
	b.Run("counts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.MailboxCounts(ctx, a.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}
