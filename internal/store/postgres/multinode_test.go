package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/storetest"
)

// Tests of what several nodes on one database need: each node is a Store
// of its own on the same database.

// nodes opens n stores on one new database, the first with an account.
func nodes(t *testing.T, n int, opts Options) ([]*Store, store.Account) {
	t.Helper()
	url := newDatabase(t)
	var out []*Store
	for range n {
		s, err := Open(url, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	c := context.Background()
	if _, err := out[0].AddDomain(c, "example.org"); err != nil {
		t.Fatal(err)
	}
	a, err := out[0].AddAccount(c, "user@example.org", "hash")
	if err != nil {
		t.Fatal(err)
	}
	return out, a
}

func testMessage(n int) []byte {
	return []byte(fmt.Sprintf("From: a@example.net\r\nSubject: n%d\r\nMessage-ID: <%d@example.net>\r\n\r\nbody %d\r\n", n, n, n))
}

// TestFeedAcrossNodes: a listener on node B learns of a delivery on node
// A within a second, by LISTEN/NOTIFY and by polling.
func TestFeedAcrossNodes(t *testing.T) {
	for _, feed := range []string{FeedNotify, FeedPoll} {
		t.Run(feed, func(t *testing.T) {
			opts := testOptions()
			opts.Feed = feed
			opts.PollInterval = 100 * time.Millisecond
			ns, a := nodes(t, 2, opts)
			ch, cancel := ns[1].Subscribe(a.ID)
			defer cancel()
			inbox, err := ns[1].Mailbox(context.Background(), a.ID, "INBOX")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * opts.PollInterval) // the poller's first look
			drainEvents(ch)                   // the account's creation
			for i := range 3 {
				start := time.Now()
				if _, err := ns[0].Deliver(context.Background(), store.Delivery{Raw: testMessage(i),
					Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
					t.Fatal(err)
				}
				select {
				case ev := <-ch:
					if ev != (store.Event{AccountID: a.ID, MailboxID: inbox.ID}) {
						t.Fatalf("event %+v, want INBOX %d", ev, inbox.ID)
					}
					t.Logf("%s: delivery %d seen on the other node after %v", feed, i, time.Since(start).Round(time.Millisecond))
				case <-time.After(time.Second):
					t.Fatalf("%s: no event on node B within 1 s of the delivery on node A", feed)
				}
				drainEvents(ch)
			}
			// The mailbox list: a mailbox created on A.
			if _, err := ns[0].CreateMailbox(context.Background(), a.ID, "New", ""); err != nil {
				t.Fatal(err)
			}
			if !waitEvent(ch, store.Event{AccountID: a.ID}, 2*time.Second) {
				t.Fatalf("%s: no mailbox-list event on node B", feed)
			}
		})
	}
}

func drainEvents(ch <-chan store.Event) {
	for {
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
			return
		}
	}
}

func waitEvent(ch <-chan store.Event, want store.Event, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case ev := <-ch:
			if ev == want {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestFeedReconnects: when the listening connection is cut (a database
// restart, a failover), the node listens again and tells its subscribers
// to read again, so a delivery made meanwhile is not missed.
func TestFeedReconnects(t *testing.T) {
	ns, a := nodes(t, 2, testOptions())
	ch, cancel := ns[1].Subscribe(a.ID)
	defer cancel()
	c := context.Background()
	inbox, _ := ns[0].Mailbox(c, a.ID, "INBOX")
	// Cut node B's listening connection, and deliver before it is back.
	tag, err := ns[0].pool.Exec(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()")
	if err != nil || tag.RowsAffected() != 2 {
		t.Fatalf("terminate the listeners: %v, %d", err, tag.RowsAffected())
	}
	if _, err := ns[0].Deliver(c, store.Delivery{Raw: testMessage(1), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
		t.Fatal(err)
	}
	if !waitEvent(ch, store.Event{AccountID: a.ID, MailboxID: inbox.ID}, 10*time.Second) {
		t.Fatal("node B never learned of the delivery made while it was not listening")
	}
	// And it listens again.
	drainEvents(ch)
	if _, err := ns[0].Deliver(c, store.Delivery{Raw: testMessage(2), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
		t.Fatal(err)
	}
	if !waitEvent(ch, store.Event{AccountID: a.ID, MailboxID: inbox.ID}, time.Second) {
		t.Fatal("no event after the reconnect")
	}
}

// TestConcurrentNodes: three nodes deliver, append, flag and expunge in
// one mailbox at once. UIDs are handed out without gaps or repeats,
// every acknowledged message is there once, and the MODSEQs tell every
// change (CheckChanges).
func TestConcurrentNodes(t *testing.T) {
	ns, a := nodes(t, 3, testOptions())
	c := context.Background()
	inbox, _ := ns[0].Mailbox(c, a.ID, "INBOX")
	arch, _ := ns[0].Mailbox(c, a.ID, "Archive")
	const workers, each = 4, 15
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		uids []uint32
		errs = make(chan error, 100)
	)
	for ni, s := range ns {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					n := (ni*workers+w)*each + i
					var d store.Delivered
					var err error
					if i%3 == 0 {
						d, err = s.Append(c, inbox.ID, testMessage(n), 0, nil, time.Time{})
					} else {
						var ds []store.Delivered
						// Two mailboxes at once, in either order.
						rs := []store.Recipient{{AccountID: a.ID}, {AccountID: a.ID, Mailbox: "Archive"}}
						if i%2 == 0 {
							slices.Reverse(rs)
						}
						ds, err = s.Deliver(c, store.Delivery{Raw: testMessage(n), Recipients: rs})
						for _, x := range ds {
							if x.MailboxID == inbox.ID {
								d = x
							}
						}
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					uids = append(uids, d.UID)
					mu.Unlock()
					if i%4 == 1 {
						if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: d.UID, Stop: d.UID}}, store.FlagsAdd, store.FlagSeen, nil); err != nil {
							errs <- err
							return
						}
					}
					if i%5 == 2 {
						// A move out of Archive and back competes
						// for both mailboxes' locks.
						if _, err := s.Move(c, arch.ID, store.UIDSet{{Start: 1, Stop: 2}}, inbox.ID); err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(uids)
	if len(slices.Compact(slices.Clone(uids))) != len(uids) {
		t.Fatalf("a UID handed out twice: %v", uids)
	}
	ms, err := ns[1].UIDs(c, inbox.ID)
	if err != nil {
		t.Fatal(err)
	}
	have := map[uint32]bool{}
	for _, m := range ms {
		have[m.UID] = true
	}
	for _, u := range uids {
		if !have[u] {
			t.Fatalf("acknowledged UID %d missing", u)
		}
	}
	mb, _ := ns[2].Mailbox(c, a.ID, "INBOX")
	if last := ms[len(ms)-1].UID; mb.UIDNext != last+1 {
		t.Fatalf("UIDNEXT %d after last UID %d", mb.UIDNext, last)
	}
	storetest.CheckChanges(t, ns[2], inbox.ID)
	if _, used, err := ns[0].Quota(c, a.ID); err != nil || used != sumSizes(t, ns[0], a.ID) {
		t.Fatalf("usage %d, %v; the mailboxes hold %d", used, err, sumSizes(t, ns[0], a.ID))
	}
}

func sumSizes(t *testing.T, s *Store, accountID int64) int64 {
	var n int64
	if err := s.pool.QueryRow(context.Background(), `SELECT coalesce(sum(b.size), 0)::bigint FROM mail m
		JOIN mailboxes mb ON mb.id = m.mailbox_id JOIN blobs b ON b.id = m.blob_id WHERE mb.account_id = $1`, accountID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQueueClaimsAcrossNodes: nodes claiming at once never take the same
// entry, and none is left unclaimed.
func TestQueueClaimsAcrossNodes(t *testing.T) {
	ns, _ := nodes(t, 3, testOptions())
	c := context.Background()
	const entries = 60
	for i := range entries {
		if _, err := ns[0].Enqueue(c, store.QueueEntry{MailFrom: "user@example.org",
			Recipients: []store.QueueRecipient{{Address: "x@remote.example"}}}, testMessage(i)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claimed := map[int64]int{}
	var wg sync.WaitGroup
	for _, s := range ns {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					es, err := s.ClaimQueue(c, time.Now(), time.Hour, 4)
					if err != nil {
						t.Error(err)
						return
					}
					if len(es) == 0 {
						return
					}
					mu.Lock()
					for _, e := range es {
						claimed[e.ID]++
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(claimed) != entries {
		t.Fatalf("%d of %d entries claimed", len(claimed), entries)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Fatalf("entry %d claimed %d times", id, n)
		}
	}
}

// TestBlobCollectedWhileDelivered: the collector of one node and a
// delivery of the same content on another never lose the content.
func TestBlobCollectedWhileDelivered(t *testing.T) {
	ns, a := nodes(t, 2, testOptions())
	c := context.Background()
	inbox, _ := ns[0].Mailbox(c, a.ID, "INBOX")
	for round := range 15 {
		raw := testMessage(round % 3)
		d, err := ns[0].Append(c, inbox.ID, raw, store.FlagDeleted, nil, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := ns[0].Expunge(c, inbox.ID, store.UIDSet{{Start: d.UID, Stop: d.UID}}); err != nil {
				t.Error(err)
			}
			if err := ns[0].collectOnce(c); err != nil {
				t.Error(err)
			}
		}()
		var again store.Delivered
		go func() {
			defer wg.Done()
			var err error
			if again, err = ns[1].Append(c, inbox.ID, raw, 0, nil, time.Time{}); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		ms, err := ns[1].Fetch(c, inbox.ID, store.UIDSet{{Start: again.UID, Stop: again.UID}}, store.FetchOptions{})
		if err != nil || len(ms) != 1 {
			t.Fatalf("round %d: %v %v", round, ms, err)
		}
		got, err := ns[1].ReadBlob(c, ms[0].BlobID)
		if err != nil || string(got) != string(raw) {
			t.Fatalf("round %d: the message's content is gone: %v", round, err)
		}
		if _, err := ns[1].StoreFlags(c, inbox.ID, store.UIDSet{{Start: again.UID, Stop: again.UID}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := ns[1].Expunge(c, inbox.ID, nil); err != nil {
			t.Fatal(err)
		}
	}
}
