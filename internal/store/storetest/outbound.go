package storetest

import (
	"bytes"
	"testing"
	"time"

	"pimail/internal/store"
)

func testSCRAM(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	addr := f.accounts[0].Address
	if _, err := s.SCRAM(c, addr); err == nil {
		t.Fatal("SCRAM of an account without keys succeeded")
	} else {
		wantErr(t, "SCRAM without keys", err, store.ErrNotFound)
	}
	creds := store.SCRAMCredentials{Salt: []byte("salt"), Iterations: 4096, StoredKey: []byte("stored"), ServerKey: []byte("server")}
	if err := s.SetSCRAM(c, addr, creds); err != nil {
		t.Fatalf("SetSCRAM: %v", err)
	}
	wantErr(t, "SetSCRAM unknown", s.SetSCRAM(c, "nobody@example.org", creds), store.ErrNotFound)
	wantErr(t, "SetSCRAM empty", s.SetSCRAM(c, addr, store.SCRAMCredentials{}), store.ErrInvalid)
	got, err := s.SCRAM(c, "USER0@example.org")
	if err != nil || !bytes.Equal(got.Salt, creds.Salt) || got.Iterations != 4096 ||
		!bytes.Equal(got.StoredKey, creds.StoredKey) || !bytes.Equal(got.ServerKey, creds.ServerKey) {
		t.Fatalf("SCRAM = %+v, %v; want %+v", got, err, creds)
	}
	// Replaced by a second SetSCRAM.
	creds2 := creds
	creds2.Iterations = 8192
	if err := s.SetSCRAM(c, addr, creds2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SCRAM(c, addr); got.Iterations != 8192 {
		t.Fatalf("SCRAM after update: iterations %d", got.Iterations)
	}
	// Another account is unaffected.
	if _, err := s.SCRAM(c, f.accounts[1].Address); err == nil {
		t.Fatal("keys leaked to another account")
	}
	// A new password invalidates the keys.
	if err := s.SetPassword(c, addr, "new-hash"); err != nil {
		t.Fatal(err)
	}
	_, err = s.SCRAM(c, addr)
	wantErr(t, "SCRAM after password change", err, store.ErrNotFound)
	if err := s.SetSCRAM(c, addr, creds); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SCRAM(c, addr); err != nil {
		t.Fatalf("SCRAM after SetSCRAM again: %v", err)
	}
	// Removing the account removes its keys (and is not blocked by them).
	if err := s.RemoveAccount(c, addr); err != nil {
		t.Fatalf("RemoveAccount with SCRAM keys: %v", err)
	}
	if _, err := s.AddAccount(c, addr, "new-hash"); err != nil {
		t.Fatal(err)
	}
	_, err = s.SCRAM(c, addr)
	wantErr(t, "SCRAM of a re-created account", err, store.ErrNotFound)
}

func testDKIMKeys(t *testing.T, s store.Store) {
	c := ctx(t)
	if ks, err := s.DKIMKeys(c, "example.org"); err != nil || len(ks) != 0 {
		t.Fatalf("DKIMKeys of a fresh store = %v, %v", ks, err)
	}
	k1 := store.DKIMKey{Domain: "Example.ORG", Selector: "s1", Algorithm: store.DKIMRSA, PrivateKey: []byte{1, 2, 3}, Created: time.Unix(1000, 0)}
	k2 := store.DKIMKey{Domain: "example.org", Selector: "s2", Algorithm: store.DKIMEd25519, PrivateKey: []byte{4, 5}, Created: time.Unix(2000, 0)}
	for _, k := range []store.DKIMKey{k2, k1} {
		if err := s.AddDKIMKey(c, k); err != nil {
			t.Fatalf("AddDKIMKey: %v", err)
		}
	}
	wantErr(t, "duplicate selector", s.AddDKIMKey(c, k1), store.ErrExists)
	wantErr(t, "bad algorithm", s.AddDKIMKey(c, store.DKIMKey{Domain: "a.org", Selector: "x", Algorithm: "dsa", PrivateKey: []byte{1}}), store.ErrInvalid)
	ks, err := s.DKIMKeys(c, "EXAMPLE.org")
	if err != nil || len(ks) != 2 {
		t.Fatalf("DKIMKeys = %v, %v", ks, err)
	}
	if ks[0].Selector != "s1" || ks[0].Algorithm != store.DKIMRSA || !bytes.Equal(ks[0].PrivateKey, k1.PrivateKey) ||
		ks[0].Domain != "example.org" || !ks[0].Created.Equal(k1.Created) || ks[1].Selector != "s2" {
		t.Fatalf("DKIMKeys = %+v", ks)
	}
	if ks, _ := s.DKIMKeys(c, "other.org"); len(ks) != 0 {
		t.Fatalf("keys of another domain: %+v", ks)
	}
}

func queueEntry(rcpts ...string) store.QueueEntry {
	e := store.QueueEntry{MailFrom: "user0@example.org", AccountID: 1}
	for _, r := range rcpts {
		e.Recipients = append(e.Recipients, store.QueueRecipient{Address: r})
	}
	return e
}

func testQueue(t *testing.T, s store.Store) {
	c := ctx(t)
	setup(t, s, 1)
	before := stats(t, s)
	now := time.Now()
	e, err := s.Enqueue(c, queueEntry("a@remote.example", "b@remote.example"), msg(1))
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if e.ID == 0 || e.BlobID == 0 || e.Size != int64(len(msg(1))) {
		t.Fatalf("Enqueue returned %+v", e)
	}
	// The same content queued twice is stored once.
	e2, err := s.Enqueue(c, store.QueueEntry{MailFrom: "", NextAttempt: now.Add(time.Hour),
		Recipients: []store.QueueRecipient{{Address: "c@remote.example"}}}, msg(1))
	if err != nil {
		t.Fatal(err)
	}
	if e2.BlobID != e.BlobID {
		t.Fatalf("same message got blobs %d and %d", e.BlobID, e2.BlobID)
	}
	if st := stats(t, s); st.Blobs != before.Blobs+1 {
		t.Fatalf("blobs after enqueue: %d, before %d", st.Blobs, before.Blobs)
	}
	if raw, err := s.ReadBlob(c, e.BlobID); err != nil || !bytes.Equal(raw, msg(1)) {
		t.Fatalf("queued blob unreadable: %v", err)
	}
	all, err := s.QueueEntries(c)
	if err != nil || len(all) != 2 || all[0].ID != e.ID || len(all[0].Recipients) != 2 ||
		all[0].Recipients[1].Address != "b@remote.example" || all[1].MailFrom != "" {
		t.Fatalf("QueueEntries = %+v, %v", all, err)
	}

	// Only the due entry is claimed, and a claim leases it.
	claimed, err := s.ClaimQueue(c, now.Add(time.Second), time.Minute, 10)
	if err != nil || len(claimed) != 1 || claimed[0].ID != e.ID {
		t.Fatalf("ClaimQueue = %+v, %v", claimed, err)
	}
	if again, err := s.ClaimQueue(c, now.Add(2*time.Second), time.Minute, 10); err != nil || len(again) != 0 {
		t.Fatalf("leased entry claimed again: %+v, %v", again, err)
	}
	if later, err := s.ClaimQueue(c, now.Add(2*time.Minute), time.Minute, 1); err != nil || len(later) != 1 || later[0].ID != e.ID {
		t.Fatalf("expired lease not claimable: %+v, %v", later, err)
	}

	// A partial outcome is recorded.
	got := claimed[0]
	got.Attempts = 1
	got.NextAttempt = now.Add(30 * time.Second)
	got.DelayNotified = true
	got.Recipients[0].State = store.QueueDelivered
	got.Recipients[0].Attempts = 1
	got.Recipients[1].Attempts = 1
	got.Recipients[1].LastError = "451 4.3.0 try later"
	got.Recipients[1].LastAttempt = now
	if err := s.UpdateQueueEntry(c, got); err != nil {
		t.Fatalf("UpdateQueueEntry: %v", err)
	}
	back, err := s.QueueEntry(c, e.ID)
	if err != nil || back.Attempts != 1 || !back.DelayNotified || back.NextAttempt.UnixMilli() != got.NextAttempt.UnixMilli() ||
		back.Recipients[0].State != store.QueueDelivered || back.Recipients[1].State != store.QueuePending ||
		back.Recipients[1].LastError != "451 4.3.0 try later" || back.Recipients[1].LastAttempt.UnixMilli() != now.UnixMilli() {
		t.Fatalf("QueueEntry after update = %+v, %v", back, err)
	}
	// Retry makes it due now.
	if err := s.RetryQueueEntry(c, e.ID, now); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.ClaimQueue(c, now, time.Minute, 10); len(due) != 1 || due[0].ID != e.ID {
		t.Fatalf("retried entry not due: %+v", due)
	}
	wantErr(t, "Retry unknown", s.RetryQueueEntry(c, 999999, now), store.ErrNotFound)

	// Final: every recipient done removes the entry.
	back.Recipients[1].State = store.QueueFailed
	if err := s.UpdateQueueEntry(c, back); err != nil {
		t.Fatal(err)
	}
	_, err = s.QueueEntry(c, e.ID)
	wantErr(t, "QueueEntry after completion", err, store.ErrNotFound)
	// The blob is still referenced by the second entry.
	if raw, err := s.ReadBlob(c, e2.BlobID); err != nil || !bytes.Equal(raw, msg(1)) {
		t.Fatalf("blob of a remaining entry unreadable: %v", err)
	}
	if err := s.DropQueueEntry(c, e2.ID); err != nil {
		t.Fatalf("DropQueueEntry: %v", err)
	}
	wantErr(t, "Drop twice", s.DropQueueEntry(c, e2.ID), store.ErrNotFound)
	if all, _ := s.QueueEntries(c); len(all) != 0 {
		t.Fatalf("queue not empty: %+v", all)
	}
	// The blob is released once no entry holds it.
	deadline := time.Now().Add(10 * time.Second)
	for stats(t, s).Blobs != before.Blobs {
		if time.Now().After(deadline) {
			t.Fatalf("queued blob not released: %+v, before %+v", stats(t, s), before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testQueueReopen: queued mail survives closing the store.
func testQueueReopen(t *testing.T, open OpenFunc, reopen ReopenFunc) {
	s := open(t)
	t.Cleanup(func() { s.Close() })
	setup(t, s, 1)
	c := ctx(t)
	e, err := s.Enqueue(c, queueEntry("a@remote.example"), msg(7))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimQueue(c, time.Now(), time.Minute, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, s)
	t.Cleanup(func() { s2.Close() })
	c = ctx(t)
	got, err := s2.QueueEntry(c, e.ID)
	if err != nil || got.MailFrom != e.MailFrom || len(got.Recipients) != 1 || got.NextAttempt.Before(time.Now()) {
		t.Fatalf("queue entry after reopen = %+v, %v", got, err)
	}
	if raw, err := s2.ReadBlob(c, got.BlobID); err != nil || !bytes.Equal(raw, msg(7)) {
		t.Fatalf("queued message after reopen: %v", err)
	}
	if due, _ := s2.ClaimQueue(c, time.Now().Add(2*time.Minute), time.Minute, 10); len(due) != 1 {
		t.Fatalf("entry not due after its lease: %+v", due)
	}
}
