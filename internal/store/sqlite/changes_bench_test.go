package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"pimail/internal/store"
)

// BenchmarkChanges times Changes as an IMAP session calls it after every
// command that changed its mailbox, on the expunge benchmark's mailbox
// (expungeBenchSize messages): "none" when nothing happened since, "20"
// after 10 new messages and flag changes on 10 old ones.
func BenchmarkChanges(b *testing.B) {
	t, err := buildExpungeTemplate(filepath.Join(b.TempDir(), "template"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(t.dir, testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	mb, err := s.Mailbox(ctx, t.account, "INBOX")
	if err != nil {
		b.Fatal(err)
	}
	before := mb.HighestModSeq
	for i := range 10 {
		if _, err := s.Append(ctx, t.mailbox, expungeBenchMsg(expungeBenchSize+i), 0, nil, time.Time{}); err != nil {
			b.Fatal(err)
		}
		u := t.uids[len(t.uids)*i/10]
		if _, err := s.StoreFlags(ctx, t.mailbox, store.UIDSet{{Start: u, Stop: u}}, store.FlagsAdd, store.FlagSeen, nil); err != nil {
			b.Fatal(err)
		}
	}
	if mb, err = s.Mailbox(ctx, t.account, "INBOX"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		since uint64
		want  int
	}{{"none", mb.HighestModSeq, 0}, {"20", before, 20}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				ch, err := s.Changes(ctx, t.mailbox, c.since)
				if err != nil || len(ch.Updated) != c.want {
					b.Fatalf("Changes(%d) = %d updated, %v; want %d", c.since, len(ch.Updated), err, c.want)
				}
			}
		})
	}
}
