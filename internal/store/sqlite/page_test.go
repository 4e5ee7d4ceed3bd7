package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pimail/internal/store"
)

func pageFixture(t *testing.T) (*Store, store.Account, store.Mailbox) {
	t.Helper()
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	a, err := s.AddAccount(ctx, "u@example.org", "h")
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := s.Mailbox(ctx, a.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	return s, a, inbox
}

func TestMailboxPage(t *testing.T) {
	s, a, inbox := pageFixture(t)
	ctx := context.Background()
	const n = 7
	for i := 1; i <= n; i++ {
		raw := fmt.Sprintf("From: =?utf-8?q?J=C3=B6rg?= <j%d@example.net>\r\nTo: u@example.org\r\nSubject: number %d\r\nDate: Mon, 2 Jan 2006 15:04:05 +0200\r\n\r\nbody\r\n", i, i)
		var flags store.Flags
		if i%2 == 0 {
			flags = store.FlagSeen
		}
		if _, err := s.Append(ctx, inbox.ID, []byte(raw), flags, []string{"$Junk"}, time.Unix(int64(1000+i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.MailboxPage(ctx, inbox.ID, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 3 || page[0].UID != 5 || page[2].UID != 3 {
		t.Fatalf("page = %+v, want UIDs 5,4,3", page)
	}
	it := page[0]
	if it.Subject != "number 5" || it.From != "Jörg <j5@example.net>" || it.To != "u@example.org" {
		t.Errorf("columns = %q %q %q", it.Subject, it.From, it.To)
	}
	if _, off := it.Date.Zone(); off != 7200 || it.Date.Unix() != time.Date(2006, 1, 2, 13, 4, 5, 0, time.UTC).Unix() {
		t.Errorf("date = %v", it.Date)
	}
	if it.InternalDate.Unix() != 1005 || it.Flags != 0 || page[1].Flags != store.FlagSeen || len(it.Keywords) != 1 || it.Size == 0 {
		t.Errorf("meta = %+v / %+v", it, page[1])
	}
	if it.HasAttachment {
		t.Error("plain message has an attachment")
	}
	if tail, err := s.MailboxPage(ctx, inbox.ID, 6, 50); err != nil || len(tail) != 1 || tail[0].UID != 1 {
		t.Errorf("tail = %+v, %v", tail, err)
	}
	if none, err := s.MailboxPage(ctx, inbox.ID, 50, 50); err != nil || len(none) != 0 {
		t.Errorf("past the end = %+v, %v", none, err)
	}
	if _, err := s.MailboxPage(ctx, inbox.ID, -1, 5); err == nil {
		t.Error("negative offset accepted")
	}

	counts, err := s.MailboxCounts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != len(store.DefaultMailboxes) {
		t.Fatalf("counts = %+v", counts)
	}
	for _, c := range counts {
		want, unseen := 0, 0
		if c.ID == inbox.ID {
			want, unseen = n, 4
		}
		if c.Messages != want || c.Unseen != unseen || c.AccountID != a.ID {
			t.Errorf("%s: %d messages, %d unseen; want %d, %d", c.Name, c.Messages, c.Unseen, want, unseen)
		}
	}
}

// TestMailboxPageAttachment checks the attachment flag against the rule of
// message.Part.IsAttachment, including the cases decided by decoding.
func TestMailboxPageAttachment(t *testing.T) {
	s, _, inbox := pageFixture(t)
	ctx := context.Background()
	mp := func(partHeader string) string {
		return "From: a@example.net\r\nSubject: s\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=XX\r\n\r\n" +
			"--XX\r\nContent-Type: text/plain\r\n\r\nhello\r\n--XX\r\n" + partHeader + "\r\n\r\nAAAA\r\n--XX--\r\n"
	}
	cases := []struct {
		raw  string
		want bool
	}{
		{mp("Content-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf"), true},
		{mp("Content-Type: application/pdf; name=\"a.pdf\""), true},                           // named, no disposition
		{mp("Content-Type: image/png; name=\"a.png\"\r\nContent-Disposition: inline"), false}, // inline image
		{mp("Content-Type: text/plain; name=\"notes.txt\""), false},                           // named text is shown
		{mp("Content-Type: text/plain\r\nContent-Disposition: attachment"), true},
		{"From: \"{\\\"k\\\":\\\"name\\\"\" <a@example.net>\r\nSubject: \"disp\":\"attachment\"\r\n\r\nplain\r\n", false},
	}
	for i, c := range cases {
		if _, err := s.Append(ctx, inbox.ID, []byte(c.raw), 0, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		page, err := s.MailboxPage(ctx, inbox.ID, 0, 1)
		if err != nil || len(page) != 1 {
			t.Fatalf("case %d: %v %v", i, page, err)
		}
		if page[0].HasAttachment != c.want {
			t.Errorf("case %d: HasAttachment = %v, want %v", i, page[0].HasAttachment, c.want)
		}
	}
}

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
