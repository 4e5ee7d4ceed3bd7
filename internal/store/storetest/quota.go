package storetest

import (
	"errors"
	"testing"
	"time"

	"pimail/internal/store"
)

// RunQuota runs the quota tests (store.Quotas, RFC 9208), each on a fresh
// store from open.
func RunQuota(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"SetQuota", testSetQuota},
		{"QuotaUsageFollowsWrites", testQuotaUsage},
		{"QuotaNoticeOncePerInterval", testQuotaNotice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

func testSetQuota(t *testing.T, s store.Store) {
	f := setup(t, s, 2)
	c := ctx(t)
	if l, u, err := s.Quota(c, f.accounts[0].ID); err != nil || l != 0 || u != 0 {
		t.Fatalf("new account Quota = %d, %d, %v; want 0 (unlimited), 0", l, u, err)
	}
	v0, err := s.DirectoryVersion(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetQuota(c, "USER0@Example.org", 500<<20); err != nil {
		t.Fatalf("SetQuota: %v", err)
	}
	// The limit is part of the directory, under a new version.
	d, err := s.Directory(c)
	if err != nil || d.Version <= v0 {
		t.Fatalf("directory version %d after SetQuota (%v); want more than %d", d.Version, err, v0)
	}
	for _, a := range d.Accounts {
		if want := map[int64]int64{f.accounts[0].ID: 500 << 20}[a.ID]; a.QuotaBytes != want {
			t.Fatalf("directory account %s QuotaBytes = %d; want %d", a.Address, a.QuotaBytes, want)
		}
	}
	if l, _, err := s.Quota(c, f.accounts[0].ID); err != nil || l != 500<<20 {
		t.Fatalf("Quota after SetQuota = %d, %v; want %d", l, err, 500<<20)
	}
	if l, _, _ := s.Quota(c, f.accounts[1].ID); l != 0 {
		t.Fatalf("other account's limit = %d; want 0", l)
	}
	if err := s.SetQuota(c, "user0@example.org", 0); err != nil {
		t.Fatalf("SetQuota 0: %v", err)
	}
	if l, _, _ := s.Quota(c, f.accounts[0].ID); l != 0 {
		t.Fatalf("limit after reset = %d; want 0", l)
	}
	if err := s.SetQuota(c, "nobody@example.org", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetQuota unknown account: %v; want ErrNotFound", err)
	}
	if err := s.SetQuota(c, "user0@example.org", -1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("SetQuota negative: %v; want ErrInvalid", err)
	}
	if _, _, err := s.Quota(c, 1<<40); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Quota unknown account: %v; want ErrNotFound", err)
	}
}

// sumSizes is the account's usage computed the long way: the STATUS SIZE
// of every mailbox.
func sumSizes(t *testing.T, s store.Store, accountID int64) int64 {
	t.Helper()
	c := ctx(t)
	mbs, err := s.Mailboxes(c, accountID)
	if err != nil {
		t.Fatalf("Mailboxes: %v", err)
	}
	var sum int64
	for _, m := range mbs {
		st, err := s.MailboxStatus(c, accountID, m.Name)
		if err != nil {
			t.Fatalf("MailboxStatus: %v", err)
		}
		sum += st.Size
	}
	return sum
}

// checkUsed compares Quota's usage with want and with the mailbox sizes.
func checkUsed(t *testing.T, s store.Store, accountID, want int64, step string) {
	t.Helper()
	_, used, err := s.Quota(ctx(t), accountID)
	if err != nil {
		t.Fatalf("%s: Quota: %v", step, err)
	}
	if sum := sumSizes(t, s, accountID); used != want || sum != want {
		t.Fatalf("%s: used = %d, mailbox sizes sum to %d; want %d", step, used, sum, want)
	}
}

func testQuotaUsage(t *testing.T, s store.Store) {
	f := setup(t, s, 2)
	c := ctx(t)
	a, b := f.accounts[0].ID, f.accounts[1].ID
	size := func(n int) int64 { return int64(len(msg(n))) }

	// One delivery to both accounts: one blob, but each account is
	// charged its own copy.
	f.deliver(t, 1, 0, 1)
	checkUsed(t, s, a, size(1), "deliver")
	checkUsed(t, s, b, size(1), "deliver (other account)")

	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 2, 2) // msg(2), msg(3)
	want := size(1) + size(2) + size(3)
	checkUsed(t, s, a, want, "append")

	// Copy charges again; move does not change the total.
	archive := f.mailbox(t, 0, "Archive")
	if _, err := s.Copy(c, inbox.ID, store.UIDSet{{Start: 1, Stop: 1}}, archive.ID); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	want += size(1)
	checkUsed(t, s, a, want, "copy")
	trash := f.mailbox(t, 0, "Trash")
	if _, err := s.Move(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 2}}, trash.ID); err != nil {
		t.Fatalf("Move: %v", err)
	}
	checkUsed(t, s, a, want, "move")

	// Expunge frees.
	if _, err := s.StoreFlags(c, trash.ID, nil, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatalf("StoreFlags: %v", err)
	}
	if _, err := s.Expunge(c, trash.ID, nil); err != nil {
		t.Fatalf("Expunge: %v", err)
	}
	want -= size(2)
	checkUsed(t, s, a, want, "expunge")

	// A mailbox deleted with its messages frees them; INBOX renamed keeps them.
	if _, err := s.CreateMailbox(c, a, "Old", ""); err != nil {
		t.Fatalf("CreateMailbox: %v", err)
	}
	old := f.mailbox(t, 0, "Old")
	f.appendN(t, old, 10, 1)
	checkUsed(t, s, a, want+size(10), "append to Old")
	if err := s.DeleteMailbox(c, a, "Old"); err != nil {
		t.Fatalf("DeleteMailbox: %v", err)
	}
	checkUsed(t, s, a, want, "delete mailbox")
	if err := s.RenameMailbox(c, a, "INBOX", "Saved"); err != nil {
		t.Fatalf("RenameMailbox INBOX: %v", err)
	}
	checkUsed(t, s, a, want, "rename INBOX")

	// The other account was never touched; removing it leaves a alone.
	checkUsed(t, s, b, size(1), "other account at the end")
	if err := s.RemoveAccount(c, "user1@example.org"); err != nil {
		t.Fatalf("RemoveAccount: %v", err)
	}
	checkUsed(t, s, a, want, "after removing the other account")
}

func testQuotaNotice(t *testing.T, s store.Store) {
	f := setup(t, s, 2)
	c := ctx(t)
	a := f.accounts[0].ID
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	claim := func(id int64, at time.Time) bool {
		t.Helper()
		ok, err := s.ClaimQuotaNotice(c, id, at)
		if err != nil {
			t.Fatalf("ClaimQuotaNotice: %v", err)
		}
		return ok
	}
	if !claim(a, now) {
		t.Fatal("first claim refused")
	}
	if claim(a, now.Add(time.Hour)) || claim(a, now.Add(store.QuotaNoticeInterval-time.Second)) {
		t.Fatal("second claim within the interval granted")
	}
	if !claim(f.accounts[1].ID, now.Add(time.Hour)) {
		t.Fatal("claim of another account refused")
	}
	if !claim(a, now.Add(store.QuotaNoticeInterval)) {
		t.Fatal("claim after the interval refused")
	}
	if _, err := s.ClaimQuotaNotice(c, 1<<40, now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim for unknown account: %v; want ErrNotFound", err)
	}
}
