package sqlite

// The writer's commits: group commit, the relaxed class and its recovery,
// checkpoints (writer.go).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

// holdWriter occupies the writer with a request until release is called,
// so that the requests queued meanwhile make one batch.
func holdWriter(s *Store) (release func()) {
	ch := make(chan struct{})
	held := make(chan struct{})
	go s.write(context.Background(), func(w *wtx) error {
		close(held)
		<-ch
		return nil
	})
	<-held
	return func() { close(ch) }
}

// waitQueued waits (bounded, 5 s) until n requests are queued for the
// writer.
func waitQueued(s *Store, n int) {
	for i := 0; len(s.jobs) < n && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGroupCommit queues deliveries while the writer is held and checks that
// they are committed together.
func TestGroupCommit(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	release := holdWriter(s)
	b0, j0 := s.batches.Load(), s.batchJobs.Load()
	const n = 10
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(i), Recipients: []store.Recipient{{AccountID: a.ID}}})
			errc <- err
		}()
	}
	waitQueued(s, n)
	release()
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	batches, jobs := s.batches.Load()-b0, s.batchJobs.Load()-j0
	// The held job's own batch may or may not count yet; the n deliveries
	// must share one commit.
	if jobs < n || batches > 2 {
		t.Fatalf("%d deliveries took %d commits (%d requests)", n, batches, jobs)
	}
}

// TestFailedRequestDoesNotSpoilBatch: requests that fail are rolled back
// alone, nothing of theirs stays; the others in their batch commit, in one
// commit. The first failure reruns the batch with a savepoint per request,
// the second is rolled back to its savepoint.
func TestFailedRequestDoesNotSpoilBatch(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	release := holdWriter(s)
	b0 := s.batches.Load()
	// Queued in this order: good, bad, good, bad. A bad delivery's
	// second recipient does not exist, so its blob and first mail row
	// are written before it fails.
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		rcpts := []store.Recipient{{AccountID: a.ID}}
		if i%2 == 1 {
			rcpts = append(rcpts, store.Recipient{AccountID: a.ID + 99})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Deliver(ctx, store.Delivery{Raw: testMsg(i), Recipients: rcpts})
		}()
		waitQueued(s, i+1)
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if i%2 == 1 && !errors.Is(err, store.ErrNotFound) || i%2 == 0 && err != nil {
			t.Fatalf("delivery %d: %v (the odd ones want ErrNotFound)", i, err)
		}
	}
	ms, err := s.UIDs(ctx, inboxOf(t, s, a).ID)
	if err != nil || len(ms) != 2 || ms[0].UID != 1 || ms[1].UID != 2 {
		t.Fatalf("INBOX = %+v, %v; want the two good messages as UIDs 1 and 2", ms, err)
	}
	var blobs int
	if err := s.rdb.QueryRowContext(ctx, "SELECT count(*) FROM blobs").Scan(&blobs); err != nil || blobs != 2 {
		t.Fatalf("%d blob rows (%v); want only the good messages' 2", blobs, err)
	}
	if got := s.batches.Load() - b0; got > 2 {
		t.Fatalf("%d commits for the held request and the batch; want at most 2", got)
	}
}

func TestClosedStore(t *testing.T) {
	s, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := s.Subscribe(1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.AddDomain(context.Background(), "example.org"); err == nil {
		t.Fatalf("write after Close succeeded")
	}
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatalf("event after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("subscription not closed by Close")
	}
}

// commitLog records the synchronous setting of every commit (testHookCommit).
type commitLog struct {
	mu   sync.Mutex
	seen []int
}

func watchCommits(t *testing.T) *commitLog {
	t.Helper()
	l := &commitLog{}
	testHookCommit = func(v int) { l.mu.Lock(); l.seen = append(l.seen, v); l.mu.Unlock() }
	t.Cleanup(func() { testHookCommit = nil })
	return l
}

// take returns the settings seen since the last call.
func (l *commitLog) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.seen
	l.seen = nil
	return out
}

func setRelaxedLimits(t *testing.T, delay time.Duration, maxJobs int) {
	t.Helper()
	d, m := relaxedSyncDelay, maxRelaxedJobs
	relaxedSyncDelay, maxRelaxedJobs = delay, maxJobs
	t.Cleanup(func() { relaxedSyncDelay, maxRelaxedJobs = d, m })
}

// TestRelaxedCommitClasses: expunges and flag changes commit without fsync
// (synchronous=NORMAL), every delivery and append with it (FULL); a durable
// commit after relaxed ones syncs them all, and the collector deletes files
// only after the expunges that freed them are on disk.
func TestRelaxedCommitClasses(t *testing.T) {
	if bootID() == "" {
		t.Skip("no boot id: commits are never relaxed here")
	}
	setRelaxedLimits(t, time.Hour, 1024) // no sync by the timer during this test
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	inbox := inboxOf(t, s, a)
	for i := range 3 {
		if _, err := s.Append(ctx, inbox.ID, testMsg(i), 0, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	log := watchCommits(t)
	del := func(uid uint32) {
		t.Helper()
		if _, err := s.StoreFlags(ctx, inbox.ID, store.UIDSet{{Start: uid, Stop: uid}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The first relaxed request of a store is durable: it writes the marker.
	del(1)
	if got := log.take(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("first flag change committed with synchronous %v, want [2] (it writes the marker)", got)
	}
	var n int
	if err := s.rdb.QueryRow("SELECT count(*) FROM meta WHERE key = ?", s.rx.marker).Scan(&n); err != nil || n != 1 || s.rx.marker == "" {
		t.Fatalf("marker %q rows %d, %v", s.rx.marker, n, err)
	}
	if uids, err := s.Expunge(ctx, inbox.ID, nil); err != nil || len(uids) != 1 {
		t.Fatalf("Expunge = %v, %v", uids, err)
	}
	if got := log.take(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("expunge committed with synchronous %v, want [1] (NORMAL)", got)
	}
	if p := s.rx.pending.Load(); p != 1 {
		t.Fatalf("pending relaxed requests = %d, want 1", p)
	}
	// A delivery after the relaxed expunge: committed with fsync, and that
	// fsync makes the expunge durable too.
	if _, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(10), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("delivery after a relaxed expunge committed with synchronous %v, want [2] (FULL)", got)
	}
	if p := s.rx.pending.Load(); p != 0 {
		t.Fatalf("pending relaxed requests after a durable commit = %d, want 0", p)
	}
	var syncMode int
	if err := s.wdb.QueryRow("PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != 2 {
		t.Fatalf("write connection at rest: synchronous = %d, %v; want 2 (FULL)", syncMode, err)
	}
	// A request that acts on earlier commits (the collector) runs after a sync.
	del(2)
	if _, err := s.Expunge(ctx, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	log.take()
	pendingSeen := int64(-1)
	if err := s.writeAfterDurable(ctx, func(w *wtx) error { pendingSeen = s.rx.pending.Load(); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); pendingSeen != 0 || len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("durable-past request saw %d pending, commits %v; want 0 pending after a durable sync [2 2]", pendingSeen, got)
	}
	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.blobPath(hashRaw(testMsg(1)))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("expunged message's file after collection: %v", err)
	}
	log.take()
	// The bound on unsynced relaxed requests.
	maxRelaxedJobs = 2
	for _, f := range []store.Flags{store.FlagSeen, store.FlagFlagged, store.FlagAnswered} {
		if _, err := s.StoreFlags(ctx, inbox.ID, nil, store.FlagsAdd, f, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := log.take(); len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("three flag changes with at most 2 unsynced: synchronous %v, want [1 1 2]", got)
	}
}

// TestRelaxedSyncedByWriter: relaxed commits do not stay unsynced when no
// other commit follows; Close syncs them and removes the marker.
func TestRelaxedSyncedByWriter(t *testing.T) {
	if bootID() == "" {
		t.Skip("no boot id: commits are never relaxed here")
	}
	setRelaxedLimits(t, 20*time.Millisecond, 1024)
	dir := t.TempDir()
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	inbox := inboxOf(t, s, a)
	if _, err := s.Append(ctx, inbox.ID, testMsg(1), 0, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	log := watchCommits(t)
	for _, f := range []store.Flags{store.FlagSeen, store.FlagFlagged} {
		if _, err := s.StoreFlags(ctx, inbox.ID, nil, store.FlagsAdd, f, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Bounded wait for the writer's own sync (20 ms after the commit).
	for i := 0; s.rx.pending.Load() != 0 && i < 1000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if p := s.rx.pending.Load(); p != 0 {
		t.Fatalf("relaxed commits still unsynced after 10 s: %d", p)
	}
	got := log.take()
	if len(got) != 3 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("commits %v, want [2 1 2]: marker, relaxed change, the writer's sync", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "pimail.db")+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM meta WHERE key LIKE 'relaxed:%'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("markers after Close: %d, %v; want 0", n, err)
	}
}

// TestRelaxedRecoveryAfterPowerFailure: a marker left by a store of another
// boot means relaxed commits may have been lost with modification
// sequences clients saw; Open raises every mailbox's HIGHESTMODSEQ beyond
// them and gives every message the new value, so a CONDSTORE client's
// CHANGEDSINCE/QRESYNC reports everything again. A marker of this boot
// (another running process) changes nothing.
func TestRelaxedRecoveryAfterPowerFailure(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	inbox := inboxOf(t, s, a)
	for i := range 3 {
		if _, err := s.Append(ctx, inbox.ID, testMsg(i), 0, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.StoreFlags(ctx, inbox.ID, nil, store.FlagsAdd, store.FlagSeen, nil); err != nil {
		t.Fatal(err)
	}
	live := fmt.Sprintf("relaxed:%s:1:1", bootID())
	if err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec("INSERT INTO meta (key, value) VALUES ('relaxed:some-earlier-boot:123:1', 1), (?, 1)", live)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	before := inboxOf(t, s, a).HighestModSeq
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	mb := inboxOf(t, s2, a)
	want := before + relaxedModSeqGap // once, however many stale markers
	if mb.HighestModSeq != want {
		t.Fatalf("HIGHESTMODSEQ after the crash = %d, want %d (%d + gap)", mb.HighestModSeq, want, before)
	}
	ch, err := s2.Changes(ctx, inbox.ID, before)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Updated) != 3 {
		t.Fatalf("changes since the last MODSEQ before the crash: %d messages, want all 3", len(ch.Updated))
	}
	for _, m := range ch.Updated {
		if m.ModSeq != want {
			t.Fatalf("message UID %d MODSEQ %d, want %d", m.UID, m.ModSeq, want)
		}
	}
	var keys []string
	rows, err := s2.rdb.Query("SELECT key FROM meta WHERE key LIKE 'relaxed:%'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		keys = append(keys, k)
	}
	rows.Close()
	if bootID() != "" && (len(keys) != 1 || keys[0] != live) {
		t.Fatalf("markers after recovery: %v, want only this boot's %q", keys, live)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean restart changes nothing.
	s3, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if bootID() != "" {
		if got := inboxOf(t, s3, a).HighestModSeq; got != want {
			t.Fatalf("HIGHESTMODSEQ after a clean restart = %d, want %d", got, want)
		}
	}
}

// TestCheckpointOffTheCommitPath: commits checkpoint only as a backstop
// (wal_autocheckpoint=walBackstop rather than 1000); the checkpointer does,
// once checkpointCommits commits are in the WAL and the writer is quiet, or
// after checkpointIdle without a commit.
func TestCheckpointOffTheCommitPath(t *testing.T) {
	// setCheckpoints sets the checkpointer's thresholds for the next Open.
	setCheckpoints := func(t *testing.T, commits int64, idle time.Duration) {
		c, q, i := checkpointCommits, checkpointQuiet, checkpointIdle
		checkpointCommits, checkpointQuiet, checkpointIdle = commits, 10*time.Millisecond, idle
		t.Cleanup(func() { checkpointCommits, checkpointQuiet, checkpointIdle = c, q, i })
	}
	ctx := context.Background()
	appendN := func(t *testing.T, s *Store, inbox int64, n int) {
		t.Helper()
		for i := range n {
			if _, err := s.Append(ctx, inbox, testMsg(i), 0, nil, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitCheckpoint := func(t *testing.T, s *Store, n0 int64) {
		t.Helper()
		for i := 0; s.checkpoints.Load() == n0 && i < 1000; i++ { // bounded wait
			time.Sleep(10 * time.Millisecond)
		}
		if s.checkpoints.Load() == n0 {
			t.Fatalf("no checkpoint 10 s after the commits")
		}
	}
	t.Run("Commits", func(t *testing.T) {
		setCheckpoints(t, 20, time.Hour)
		s := openTest(t)
		var ac int
		if err := s.wdb.QueryRow("PRAGMA wal_autocheckpoint").Scan(&ac); err != nil || ac != walBackstop {
			t.Fatalf("write connection wal_autocheckpoint = %d, %v; want %d", ac, err, walBackstop)
		}
		inbox := inboxOf(t, s, mustAccount(t, s, "u@example.org")).ID
		appendN(t, s, inbox, 1)
		time.Sleep(300 * time.Millisecond) // 30 times checkpointQuiet
		if n := s.checkpoints.Load(); n != 0 {
			t.Fatalf("%d checkpoints after %d commits; want none before %d", n, s.commits.Load(), checkpointCommits)
		}
		appendN(t, s, inbox, 20)
		waitCheckpoint(t, s, 0)
	})
	t.Run("Idle", func(t *testing.T) {
		setCheckpoints(t, 1000, 100*time.Millisecond)
		s := openTest(t)
		inbox := inboxOf(t, s, mustAccount(t, s, "u@example.org")).ID
		waitCheckpoint(t, s, 0) // the account's commits
		n0 := s.checkpoints.Load()
		appendN(t, s, inbox, 1)
		waitCheckpoint(t, s, n0)
	})
}

// TestGroupWait: after a commit of several requests, the writer waits
// GroupWait for more before the next commit; after a lone one it does not.
func TestGroupWait(t *testing.T) {
	o := testOptions()
	o.GroupWait = 2 * time.Second
	s, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	deliver := func(i int) error {
		_, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(i), Recipients: []store.Recipient{{AccountID: a.ID}}})
		return err
	}
	// A lone request after a lone commit (mustAccount's) is not held.
	start := time.Now()
	if err := deliver(0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a lone delivery took %v; the group wait is only for concurrent ones", d)
	}
	// Two requests queued behind a held one commit together ...
	release := holdWriter(s)
	errs := make(chan error, 4)
	for i := 1; i <= 2; i++ {
		go func() { errs <- deliver(i) }()
		waitQueued(s, i)
	}
	b0 := s.batches.Load()
	release()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// ... so the next commit waits: two deliveries 100 ms apart share it.
	b1 := s.batches.Load()
	go func() { errs <- deliver(3) }()
	time.Sleep(100 * time.Millisecond)
	go func() { errs <- deliver(4) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := s.batches.Load(); b1-b0 != 2 || got-b1 != 1 {
		t.Fatalf("commits: %d for the held request and the queued pair, %d for the spaced pair; want 2 and 1", b1-b0, got-b1)
	}
}
