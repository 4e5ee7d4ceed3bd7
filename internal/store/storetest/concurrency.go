package storetest

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

func testConcurrentDeliveries(t *testing.T, s store.Store) {
	f := setup(t, s, 2)
	const workers, each = 20, 5
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	var mu sync.Mutex
	var uids []uint32
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ds, err := s.Deliver(ctx(t), store.Delivery{Raw: msg(1000 + w*each + i), Recipients: []store.Recipient{
					{AccountID: f.accounts[0].ID}, {AccountID: f.accounts[1].ID, Mailbox: "Archive"},
				}})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				uids = append(uids, ds[0].UID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Deliver: %v", err)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	for i, u := range uids {
		if u != uint32(i+1) {
			t.Fatalf("acknowledged UIDs not 1..%d without gaps or duplicates: %v", workers*each, uids)
		}
	}
	ms := fetchAll(t, s, f.mailbox(t, 0, "INBOX").ID)
	if !equalUIDs(uidsOf(ms), uids) {
		t.Fatalf("stored UIDs %v, acknowledged %v", uidsOf(ms), uids)
	}
	if n := len(fetchAll(t, s, f.mailbox(t, 1, "Archive").ID)); n != workers*each {
		t.Fatalf("second recipient has %d messages, want %d", n, workers*each)
	}
	st := stats(t, s)
	if st.Blobs != workers*each || st.Messages != 2*workers*each {
		t.Fatalf("Stats = %+v, want %d blobs and %d messages", st, workers*each, 2*workers*each)
	}
	// Each stored message is the one delivered under that UID's content.
	seen := map[string]bool{}
	for _, m := range ms {
		raw, err := s.ReadBlob(ctx(t), m.BlobID)
		if err != nil {
			t.Fatalf("ReadBlob: %v", err)
		}
		if seen[string(raw)] {
			t.Fatalf("two messages share content")
		}
		seen[string(raw)] = true
	}
}

// recv waits a bounded time for an event.
func recv(t *testing.T, ch <-chan store.Event) (store.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-time.After(5 * time.Second):
		t.Fatalf("no change-feed event within 5s")
		return store.Event{}, false
	}
}

// drain reads events until none arrives for a short while.
func drain(ch <-chan store.Event) []store.Event {
	var evs []store.Event
	for range 10000 {
		select {
		case ev, ok := <-ch:
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-time.After(200 * time.Millisecond):
			return evs
		}
	}
	return evs
}

func hasEvent(evs []store.Event, want store.Event) bool {
	for _, ev := range evs {
		if ev == want {
			return true
		}
	}
	return false
}

func testChangeFeed(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	acc := f.accounts[0].ID
	inbox := f.mailbox(t, 0, "INBOX")
	ch, cancel := s.Subscribe(acc)
	defer cancel()
	other, cancelOther := s.Subscribe(f.accounts[1].ID)
	defer cancelOther()

	f.deliver(t, 1, 0)
	if ev, ok := recv(t, ch); !ok || ev != (store.Event{AccountID: acc, MailboxID: inbox.ID}) {
		t.Fatalf("event after delivery = %+v, %v", ev, ok)
	}
	// Each kind of change wakes the listener.
	steps := []struct {
		what string
		do   func() error
		want store.Event
	}{
		{"flags", func() error {
			_, err := s.StoreFlags(c, inbox.ID, nil, store.FlagsAdd, store.FlagDeleted, nil)
			return err
		}, store.Event{AccountID: acc, MailboxID: inbox.ID}},
		{"expunge", func() error { _, err := s.Expunge(c, inbox.ID, nil); return err }, store.Event{AccountID: acc, MailboxID: inbox.ID}},
		{"append", func() error { _, err := s.Append(c, inbox.ID, msg(2), 0, nil, time.Time{}); return err }, store.Event{AccountID: acc, MailboxID: inbox.ID}},
		{"copy", func() error {
			_, err := s.Copy(c, inbox.ID, nil, f.mailbox(t, 0, "Archive").ID)
			return err
		}, store.Event{AccountID: acc, MailboxID: f.mailbox(t, 0, "Archive").ID}},
		{"move", func() error {
			_, err := s.Move(c, inbox.ID, nil, f.mailbox(t, 0, "Trash").ID)
			return err
		}, store.Event{AccountID: acc, MailboxID: inbox.ID}},
		{"create", func() error { _, err := s.CreateMailbox(c, acc, "New", ""); return err }, store.Event{AccountID: acc}},
		{"rename", func() error { return s.RenameMailbox(c, acc, "New", "Newer") }, store.Event{AccountID: acc}},
		{"delete", func() error { return s.DeleteMailbox(c, acc, "Newer") }, store.Event{AccountID: acc}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if evs := drain(ch); !hasEvent(evs, st.want) {
			t.Fatalf("events after %s = %+v, want %+v", st.what, evs, st.want)
		}
	}
	if evs := drain(other); len(evs) != 0 {
		t.Fatalf("other account got events %+v", evs)
	}
	cancel()
	// After cancel the channel is closed (bounded wait).
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("channel not closed after cancel")
		}
	}
}

func testChangeFeedSlowListener(t *testing.T, s store.Store) {
	f := setup(t, s, 1)
	acc := f.accounts[0].ID
	inbox := f.mailbox(t, 0, "INBOX")
	ch, cancel := s.Subscribe(acc)
	defer cancel()
	// Nobody reads: writes must not block on the listener.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			if _, err := s.Append(ctx(t), inbox.ID, msg(i), 0, nil, time.Time{}); err != nil {
				t.Errorf("Append: %v", err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("writes blocked by a listener that does not read")
	}
	// The listener still learns that INBOX changed; duplicates are coalesced.
	evs := drain(ch)
	if !hasEvent(evs, store.Event{AccountID: acc, MailboxID: inbox.ID}) {
		t.Fatalf("slow listener got %+v, want an INBOX event", evs)
	}
	if len(evs) >= 100 {
		t.Errorf("slow listener got %d events for 100 appends: not coalesced", len(evs))
	}
}

func testReopen(t *testing.T, open OpenFunc, reopen ReopenFunc) {
	s := open(t)
	t.Cleanup(func() { s.Close() })
	f := setup(t, s, 1)
	c := ctx(t)
	f.deliver(t, 1, 0)
	f.deliver(t, 2, 0)
	inbox := f.mailbox(t, 0, "INBOX")
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 1, Stop: 1}}, store.FlagsAdd, store.FlagSeen, []string{"$Kw"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAlias(c, "info@example.org", []string{"user0@example.org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateMailbox(c, f.accounts[0].ID, "Kept", ""); err != nil {
		t.Fatal(err)
	}
	writeState(t, s, f)
	ver, _ := s.DirectoryVersion(c)
	inbox = f.mailbox(t, 0, "INBOX")
	before := fetchAll(t, s, inbox.ID)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s2 := reopen(t, s)
	t.Cleanup(func() { s2.Close() })
	c = ctx(t)
	if v, err := s2.DirectoryVersion(c); err != nil || v != ver {
		t.Fatalf("DirectoryVersion after reopen = %d, %v; want %d", v, err, ver)
	}
	a, err := s2.Account(c, "user0@example.org")
	if err != nil || a.ID != f.accounts[0].ID {
		t.Fatalf("account after reopen = %+v, %v", a, err)
	}
	if al, err := s2.Aliases(c); err != nil || len(al) != 1 {
		t.Fatalf("aliases after reopen = %+v, %v", al, err)
	}
	m, err := s2.Mailbox(c, a.ID, "INBOX")
	if err != nil || m != inbox {
		t.Fatalf("INBOX after reopen = %+v, %v; want %+v", m, err, inbox)
	}
	if _, err := s2.Mailbox(c, a.ID, "Kept"); err != nil {
		t.Fatalf("created mailbox lost: %v", err)
	}
	checkState(t, s2, f)
	after := fetchAll(t, s2, inbox.ID)
	if len(after) != len(before) {
		t.Fatalf("messages after reopen = %d, want %d", len(after), len(before))
	}
	for i := range after {
		b, a := before[i], after[i]
		if a.UID != b.UID || a.ModSeq != b.ModSeq || a.Flags != b.Flags || !a.InternalDate.Equal(b.InternalDate) || a.Size != b.Size {
			t.Fatalf("message %d after reopen = %+v, before %+v", i, a, b)
		}
	}
	raw, err := s2.ReadBlob(c, after[1].BlobID)
	if err != nil || !bytes.Equal(raw, msg(2)) {
		t.Fatalf("ReadBlob after reopen: %v", err)
	}
	// UIDs continue.
	ds, err := s2.Deliver(c, store.Delivery{Raw: msg(3), Recipients: []store.Recipient{{AccountID: a.ID}}})
	if err != nil || ds[0].UID != 3 {
		t.Fatalf("Deliver after reopen = %+v, %v; want UID 3", ds, err)
	}
}

// testCorpus stores messages from the test corpus,
// including malformed ones, and reads them back byte for byte.
func testCorpus(t *testing.T, s store.Store) {
	dir := corpusDir(t)
	var files []string
	for _, sub := range []string{"ham", "spam", "edge"} {
		m, _ := filepath.Glob(filepath.Join(dir, sub, "*.eml"))
		sort.Strings(m)
		files = append(files, m[:min(len(m), 15)]...)
	}
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	var raws [][]byte
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) == 0 {
			continue
		}
		if _, err := s.Append(ctx(t), inbox.ID, raw, 0, nil, time.Time{}); err != nil {
			t.Fatalf("Append %s: %v", filepath.Base(name), err)
		}
		raws = append(raws, raw)
	}
	ms, err := s.Fetch(ctx(t), inbox.ID, nil, store.FetchOptions{Parsed: true})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if len(ms) != len(raws) {
		t.Fatalf("stored %d of %d corpus messages", len(ms), len(raws))
	}
	for i, m := range ms {
		if m.Parsed == nil || m.Parsed.Body == nil || m.Size != int64(len(raws[i])) {
			t.Fatalf("corpus message %d: %+v", i, m)
		}
		raw, err := s.ReadBlob(ctx(t), m.BlobID)
		if err != nil || !bytes.Equal(raw, raws[i]) {
			t.Fatalf("corpus message %d not returned byte for byte: %v", i, err)
		}
	}
}
