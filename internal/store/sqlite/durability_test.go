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
