package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

func testMsg(n int) []byte {
	return []byte(fmt.Sprintf("From: a@example.net\r\nTo: b@example.org\r\nSubject: m%d\r\nMessage-ID: <m%d@x>\r\n\r\nbody %d\r\n", n, n, n))
}

func mustAccount(t *testing.T, s *Store, addr string) store.Account {
	t.Helper()
	ctx := context.Background()
	dom := addr[strings.LastIndexByte(addr, '@')+1:]
	if _, err := s.AddDomain(ctx, dom); err != nil && !errors.Is(err, store.ErrExists) {
		t.Fatalf("AddDomain: %v", err)
	}
	a, err := s.AddAccount(ctx, addr, "h")
	if err != nil {
		t.Fatalf("AddAccount: %v", err)
	}
	return a
}

func inboxOf(t *testing.T, s *Store, a store.Account) store.Mailbox {
	t.Helper()
	m, err := s.Mailbox(context.Background(), a.ID, "INBOX")
	if err != nil {
		t.Fatalf("Mailbox: %v", err)
	}
	return m
}

func TestPragmas(t *testing.T) {
	s := openTest(t)
	var mode string
	var syncMode, busy int
	if err := s.wdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := s.wdb.QueryRow("PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != 2 {
		t.Fatalf("synchronous = %d, %v; want 2 (FULL)", syncMode, err)
	}
	if err := s.rdb.QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil || busy <= 0 {
		t.Fatalf("busy_timeout on readers = %d, %v", busy, err)
	}
	if _, err := s.rdb.Exec("INSERT INTO meta (key, value) VALUES ('x', 1)"); err == nil {
		t.Fatalf("read pool accepted a write")
	}
	for _, d := range []string{"blobs", "blobs/tmp"} {
		if st, err := os.Stat(filepath.Join(s.Dir(), d)); err != nil || !st.IsDir() {
			t.Fatalf("%s missing: %v", d, err)
		}
	}
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "pimail")
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode = %v, %v; want 0700", st.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pimail.db")); err != nil {
		t.Fatalf("pimail.db: %v", err)
	}
}

func TestOrphanCollectionAtOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, fileOptions())
	if err != nil {
		t.Fatal(err)
	}
	a := mustAccount(t, s, "u@example.org")
	kept, err := s.Append(context.Background(), inboxOf(t, s, a).ID, testMsg(1), 0, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	keptSHA := hashRaw(testMsg(1))
	// A crash between file write and commit: files without rows.
	oldSHA, youngSHA := hashRaw(testMsg(2)), hashRaw(testMsg(3))
	for _, sha := range []string{oldSHA, youngSHA} {
		if err := s.writeBlob(sha, testMsg(2)); err != nil {
			t.Fatal(err)
		}
	}
	tmpOld := filepath.Join(dir, "blobs", "tmp", "crashed-old")
	tmpYoung := filepath.Join(dir, "blobs", "tmp", "in-flight")
	for _, p := range []string{tmpOld, tmpYoung} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	for _, p := range []string{s.blobPath(oldSHA), s.blobPath(keptSHA), tmpOld} {
		if err := os.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}

	opts := testOptions()
	opts.OrphanGrace = 10 * time.Minute
	s2, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if exists(s2.blobPath(oldSHA)) || exists(tmpOld) {
		t.Errorf("old orphan files not collected at Open")
	}
	if !exists(s2.blobPath(youngSHA)) || !exists(tmpYoung) {
		t.Errorf("young orphan files (maybe a pending delivery) were collected")
	}
	if raw, err := s2.ReadBlob(context.Background(), 1); err != nil || string(raw) != string(testMsg(1)) || !exists(s2.blobPath(keptSHA)) {
		t.Errorf("referenced old blob lost: %v (delivered %+v)", err, kept)
	}
}

func TestRefcountZeroDeletesFile(t *testing.T) {
	s := openFileTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	b := mustAccount(t, s, "v@example.org")
	ds, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(1), Recipients: []store.Recipient{{AccountID: a.ID}, {AccountID: b.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	path := s.blobPath(hashRaw(testMsg(1)))
	expungeAll := func(mb int64) {
		t.Helper()
		if _, err := s.StoreFlags(ctx, mb, nil, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Expunge(ctx, mb, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.collectOnce(); err != nil {
			t.Fatalf("collect: %v", err)
		}
	}
	expungeAll(ds[0].MailboxID)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("blob still referenced by the second recipient was deleted: %v", err)
	}
	expungeAll(ds[1].MailboxID)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("blob file after the last reference went: %v, want deleted", err)
	}
	var n int
	if err := s.rdb.QueryRow("SELECT count(*) FROM blobs").Scan(&n); err != nil || n != 0 {
		t.Fatalf("blob rows left: %d, %v", n, err)
	}
	// The same content delivered again is written again.
	if _, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(1), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("redelivered blob missing: %v", err)
	}
}

// TestCollectorRace delivers the same content again and again while the
// same content is expunged and collected: no committed row may ever point
// at a missing file.
func TestCollectorRace(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	inbox := inboxOf(t, s, a)
	raw := testMsg(42)
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Add(2)
	go func() { // deliver and expunge in turn
		defer wg.Done()
		for i := 0; i < 2000 && time.Now().Before(stop); i++ {
			if _, err := s.Append(ctx, inbox.ID, raw, store.FlagDeleted, nil, time.Time{}); err != nil {
				errc <- err
				return
			}
			if i%2 == 1 {
				if _, err := s.Expunge(ctx, inbox.ID, nil); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	go func() { // collect continuously
		defer wg.Done()
		for i := 0; i < 2000 && time.Now().Before(stop); i++ {
			if err := s.collectOnce(); err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	ms, err := s.UIDs(ctx, inbox.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := s.ReadBlob(ctx, m.BlobID); err != nil {
			t.Fatalf("message UID %d points at a missing blob: %v", m.UID, err)
		}
	}
}

// TestCollectorBetweenWriteAndCommit makes the collector remove the file of
// an unreferenced blob right after a new delivery of the same content found
// it present: the delivery must notice and write the file again.
func TestCollectorBetweenWriteAndCommit(t *testing.T) {
	s := openFileTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "u@example.org")
	inbox := inboxOf(t, s, a)
	raw := testMsg(7)
	if _, err := s.Append(ctx, inbox.ID, raw, store.FlagDeleted, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expunge(ctx, inbox.ID, nil); err != nil { // refcount 0, not collected yet
		t.Fatal(err)
	}
	if _, err := os.Stat(s.blobPath(hashRaw(raw))); err != nil {
		t.Fatalf("file collected too early: %v", err)
	}
	calls := 0
	testHookBlobWritten = func() {
		calls++
		if calls == 1 {
			if err := s.collectOnce(); err != nil {
				t.Errorf("collect: %v", err)
			}
		}
	}
	defer func() { testHookBlobWritten = nil }()
	d, err := s.Append(ctx, inbox.ID, raw, 0, nil, time.Time{})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if calls != 2 {
		t.Fatalf("file written %d times, want 2 (the collector removed the first)", calls)
	}
	ms, err := s.Fetch(ctx, inbox.ID, store.UIDSet{{Start: d.UID, Stop: d.UID}}, store.FetchOptions{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Fetch: %v %v", ms, err)
	}
	if got, err := s.ReadBlob(ctx, ms[0].BlobID); err != nil || string(got) != string(raw) {
		t.Fatalf("ReadBlob after the race: %v", err)
	}
}

func TestMigrationSnapshot(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	mustAccount(t, s, "u@example.org")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A newer program with one more step.
	orig := migrations
	t.Cleanup(func() { migrations = orig })
	migrations = append(append([]string(nil), orig...), "CREATE TABLE test_extra (x INTEGER)")

	s2, err := Open(dir, testOptions())
	if err != nil {
		t.Fatalf("Open with a new migration: %v", err)
	}
	defer s2.Close()
	var v int
	if err := s2.rdb.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("user_version = %d, %v; want %d", v, err, len(migrations))
	}
	if _, err := s2.rdb.Exec("SELECT x FROM test_extra"); err != nil {
		t.Fatalf("new step not applied: %v", err)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "backup", fmt.Sprintf("pimail-v%d-*.db", len(orig))))
	if len(snaps) != 1 {
		t.Fatalf("snapshots = %v, want one pimail-v%d-*.db", snaps, len(orig))
	}
	snap, err := sql.Open("sqlite", snaps[0]+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var sv, accounts int
	if err := snap.QueryRow("PRAGMA user_version").Scan(&sv); err != nil || sv != len(orig) {
		t.Fatalf("snapshot version = %d, %v", sv, err)
	}
	if err := snap.QueryRow("SELECT count(*) FROM accounts").Scan(&accounts); err != nil || accounts != 1 {
		t.Fatalf("snapshot accounts = %d, %v", accounts, err)
	}
	// A fresh database is not snapshotted, and an up-to-date one not again.
	s2.Close()
	s3, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	s3.Close()
	if snaps, _ := filepath.Glob(filepath.Join(dir, "backup", "*.db")); len(snaps) != 1 {
		t.Fatalf("snapshots after an open without migration: %v", snaps)
	}
	// A database newer than the program is refused.
	migrations = orig
	if s4, err := Open(dir, testOptions()); err == nil {
		s4.Close()
		t.Fatalf("Open of a newer schema succeeded")
	}
}

// TestTwoProcesses opens the same directory twice, as the CLI does while the
// server runs: writes from both interleave (SQLITE_BUSY handled) and each
// sees the other's directory changes.
func TestTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	srv, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	a := mustAccount(t, srv, "u@example.org")
	inbox := inboxOf(t, srv, a)
	v0, _ := srv.DirectoryVersion(ctx)

	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if _, err := srv.Append(ctx, inbox.ID, testMsg(w*100+i), 0, nil, time.Time{}); err != nil {
					errc <- fmt.Errorf("server append: %w", err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 10 {
			if _, err := cli.AddAccount(ctx, fmt.Sprintf("cli%d@example.org", i), "h"); err != nil {
				errc <- fmt.Errorf("cli add account: %w", err)
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if v, err := srv.DirectoryVersion(ctx); err != nil || v < v0+10 {
		t.Fatalf("server DirectoryVersion = %d, %v; want ≥ %d", v, err, v0+10)
	}
	if _, err := srv.Account(ctx, "cli9@example.org"); err != nil {
		t.Fatalf("server does not see the CLI's account: %v", err)
	}
	ms, err := cli.UIDs(ctx, inbox.ID)
	if err != nil || len(ms) != 40 {
		t.Fatalf("CLI sees %d messages, %v; want 40", len(ms), err)
	}
}

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
