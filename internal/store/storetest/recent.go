package storetest

import (
	"sync"
	"testing"

	"pimail/internal/store"
)

// testRecent: \Recent claims (store.Recent): mail that arrived while
// nobody claimed it is unclaimed (MailboxStatus.Recent), a claim takes
// it once, concurrent claims never take the same UID, and new mail is
// unclaimed again.
func testRecent(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	acc := f.accounts[0].ID
	inbox := f.mailbox(t, 0, "INBOX")
	if inbox.FirstRecentUID != 1 {
		t.Fatalf("new mailbox FirstRecentUID = %d, want 1", inbox.FirstRecentUID)
	}
	f.appendN(t, inbox, 0, 3)
	status := func(want int) {
		t.Helper()
		st, err := s.MailboxStatus(c, acc, "INBOX")
		if err != nil || st.Recent != want {
			t.Fatalf("MailboxStatus.Recent = %d, %v; want %d", st.Recent, err, want)
		}
	}
	status(3)
	first, err := s.ClaimRecent(c, inbox.ID, 2)
	if err != nil || first != 1 {
		t.Fatalf("ClaimRecent(2) = %d, %v; want 1", first, err)
	}
	status(1)
	if m := f.mailbox(t, 0, "INBOX"); m.FirstRecentUID != 3 {
		t.Fatalf("FirstRecentUID = %d, want 3", m.FirstRecentUID)
	}
	if first, err := s.ClaimRecent(c, inbox.ID, 2); err != nil || first <= 2 {
		t.Fatalf("second ClaimRecent(2) = %d, %v; want nothing claimed", first, err)
	}
	// Concurrent claims of the same range: exactly one gets UID 3.
	var mu sync.Mutex
	won := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, err := s.ClaimRecent(c, inbox.ID, 3)
			if err != nil {
				t.Errorf("ClaimRecent: %v", err)
				return
			}
			if first <= 3 {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d concurrent claims got UID 3, want 1", won)
	}
	status(0)
	f.appendN(t, inbox, 3, 2)
	status(2)
	_, err = s.ClaimRecent(c, 1<<40, 1)
	wantErr(t, "ClaimRecent unknown mailbox", err, store.ErrNotFound)
}
