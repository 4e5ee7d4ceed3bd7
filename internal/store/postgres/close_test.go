package postgres

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pimail/internal/store"
)

// TestCloseWhileDelivering closes the store while deliveries wait for
// their batch. Deliver keeps no reference to the message once it returns:
// the SMTP server unmaps a spooled message right after, so a store that
// still read it would store garbage or fault. Here every caller whose
// Deliver fails overwrites its message at once; no stored message may
// show that, and no message whose Deliver failed may be stored (its
// sender was told to try again).
func TestCloseWhileDelivering(t *testing.T) {
	url := newDatabase(t)
	ctx := context.Background()
	var acct store.Account
	for round := range 6 {
		s, err := Open(url, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := s.AddDomain(ctx, "example.org"); err != nil {
				t.Fatal(err)
			}
			if acct, err = s.AddAccount(ctx, "user@example.org", "hash"); err != nil {
				t.Fatal(err)
			}
		}
		const n = 150
		var wg sync.WaitGroup
		var mu sync.Mutex
		var stored atomic.Int32
		failed := map[string]bool{}
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				subject := fmt.Sprintf("r%d-%d", round, i)
				raw := []byte("From: a@example.net\r\nSubject: " + subject + "\r\n\r\n" + string(bytes.Repeat([]byte("body\r\n"), 500)))
				<-start
				_, err := s.Deliver(ctx, store.Delivery{Raw: raw, Recipients: []store.Recipient{{AccountID: acct.ID}}})
				if err == nil {
					stored.Add(1)
					return
				}
				for j := range raw {
					raw[j] = 'X'
				}
				mu.Lock()
				failed[subject] = true
				mu.Unlock()
			}()
		}
		close(start)
		// Close once some have committed, while the rest are under way.
		for deadline := time.Now().Add(10 * time.Second); stored.Load() < int32(1+10*round) && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		t0 := time.Now()
		s.Close()
		wg.Wait()
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("round %d: Close took %v", round, d) // it waited for a cancelled query's connection
		}

		s, err = Open(url, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		inbox, err := s.Mailbox(ctx, acct.ID, "INBOX")
		if err != nil {
			t.Fatal(err)
		}
		metas, err := s.Fetch(ctx, inbox.ID, nil, store.FetchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metas {
			raw, err := s.ReadBlob(ctx, m.BlobID)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte("XXXX")) {
				t.Fatalf("round %d: a message stored after its Deliver had returned (the caller's bytes changed): %.60q", round, raw)
			}
			_, rest, _ := bytes.Cut(raw, []byte("Subject: "))
			subject, _, _ := bytes.Cut(rest, []byte("\r\n"))
			if failed[string(subject)] {
				t.Fatalf("round %d: %s stored although its Deliver failed", round, subject)
			}
		}
		t.Logf("round %d: %d of %d refused at Close, %d stored in all", round, len(failed), n, len(metas))
		s.Close()
	}
}
