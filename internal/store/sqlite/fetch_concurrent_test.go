package sqlite

import (
	"context"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

// Many sessions fetching at once, more than the read pool has
// connections, all finish: no read path may wait for a second pooled
// connection while it holds one (a statement cache that prepared on the
// pool inside a read transaction deadlocked 20 IMAP watchers).
func TestConcurrentFetchesMorePoolConns(t *testing.T) {
	opts := testOptions()
	opts.ReadConns = 2
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	a, err := s.AddAccount(ctx, "u@example.org", "h")
	if err != nil {
		t.Fatal(err)
	}
	mb, err := s.Mailbox(ctx, a.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := s.Deliver(ctx, store.Delivery{Raw: benchMsg(int64(i)), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	all := store.UIDSet{{Start: 1, Stop: 40}} // one range, as imapd asks in chunks
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if _, _, err := s.FetchHeaders(ctx, mb.ID, all); err != nil {
					errs <- err
					return
				}
				if _, err := s.FetchEnvelopes(ctx, mb.ID, all); err != nil {
					errs <- err
					return
				}
				if _, err := s.Fetch(ctx, mb.ID, all, store.FetchOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent fetch: %v", err)
	}
}
