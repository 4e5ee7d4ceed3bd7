package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// SnapshotOptions tune Snapshot. The zero value is the default.
type SnapshotOptions struct {
	// Copy copies the message files instead of hard-linking them (links
	// are used where the target is on the same file system; they cost no
	// space and hold the file even after the store deletes its name).
	Copy bool
	// Attempts is how many times the snapshot is tried without blocking
	// writers before the last attempt holds the write lock; 0 means 3.
	Attempts int
}

// SnapshotStats describes a finished snapshot.
type SnapshotStats struct {
	Blobs     int   // message files in the snapshot
	BlobBytes int64 // their total size
	Linked    int   // of which hard-linked
	Copied    int   // of which copied (and checked against their SHA-256)
	DBBytes   int64 // size of the database copy
	Attempts  int   // attempts made (1 normally)
	Locked    bool  // the last attempt held the write lock
}

// Snapshot writes a consistent copy of the store into dir, which must be
// empty or not exist: dir/pimail.db, made by VACUUM INTO (one read
// transaction, so it is a single point in time while the store keeps
// taking mail), and dir/blobs/<hh>/<sha256>, every message file the copy
// references. The full-text index is not copied: it is rebuilt from the
// blobs.
//
// Message files are immutable and named by their content, so a file written
// after the snapshot point is simply not referenced by the copy. The danger
// is the other way: a file referenced by the copy that the collector deletes
// (after an expunge) before it is linked. Snapshot therefore
//
//  1. links (or copies) every file referenced by the live database first:
//     once linked, a file survives its deletion from the store;
//  2. takes the database copy with VACUUM INTO;
//  3. links the few files the copy references that step 1 did not see
//     (delivered in between). If one of them is gone already (delivered and
//     collected within those seconds), the attempt is repeated;
//  4. the last attempt takes the database's write lock first (as another
//     SQLite connection: the collector deletes files only inside a write
//     transaction, in this process or another), so nothing can be
//     collected between steps 2 and 3. Writers wait (and retry) meanwhile.
//
// Blob rows whose reference count is zero (awaiting collection) are removed
// from the copy, and linked files the copy does not reference are removed,
// so the result is a clean data directory. Files and directories are
// fsynced before Snapshot returns.
func (s *Store) Snapshot(ctx context.Context, dir string, opts SnapshotOptions) (SnapshotStats, error) {
	var st SnapshotStats
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if err := emptyDir(dir); err != nil {
		return st, fmt.Errorf("snapshot: %w", err)
	}
	bdir := filepath.Join(dir, "blobs")
	if err := os.MkdirAll(bdir, 0o700); err != nil {
		return st, fmt.Errorf("snapshot: create %s: %w", bdir, err)
	}
	h := &holder{src: s.blobDir, dst: bdir, copy: opts.Copy, held: map[string]int64{}}
	if err := s.applyReleases(); err != nil { // expunged references count no more (collect.go)
		return st, fmt.Errorf("snapshot: %w", err)
	}

	// Step 1, outside any lock: hold everything referenced right now.
	live, err := s.liveBlobs(ctx)
	if err != nil {
		return st, err
	}
	for _, sha := range live {
		if _, err := h.hold(sha); err != nil && !errors.Is(err, os.ErrNotExist) {
			return st, fmt.Errorf("snapshot: %w", err)
		}
	}

	dbPath := filepath.Join(dir, "pimail.db")
	for attempt := 1; attempt <= opts.Attempts+1; attempt++ {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("snapshot: %w", err)
		}
		st.Attempts = attempt
		st.Locked = attempt > opts.Attempts
		missing, err := s.snapshotOnce(ctx, dbPath, h, st.Locked)
		if err != nil {
			return st, err
		}
		if len(missing) == 0 {
			break
		}
		if st.Locked {
			return st, fmt.Errorf("snapshot: %d message files referenced by the database are missing from %s (first: %s); run pimail verify", len(missing), s.blobDir, missing[0])
		}
		s.log.Info("snapshot: message files collected during the snapshot; trying again", "missing", len(missing), "attempt", attempt)
	}

	// Drop files held in step 1 that the copy does not reference.
	want, err := snapshotBlobs(ctx, dbPath)
	if err != nil {
		return st, err
	}
	for sha := range h.held {
		if _, ok := want[sha]; !ok {
			if err := os.Remove(filepath.Join(bdir, sha[:2], sha)); err != nil {
				return st, fmt.Errorf("snapshot: remove unreferenced copy: %w", err)
			}
			delete(h.held, sha)
		}
	}
	for _, size := range want {
		st.Blobs++
		st.BlobBytes += size
	}
	st.Linked, st.Copied = h.linked, h.copied
	if fi, err := os.Stat(dbPath); err == nil {
		st.DBBytes = fi.Size()
	}
	if err := h.syncAll(); err != nil {
		return st, fmt.Errorf("snapshot: %w", err)
	}
	if err := syncFile(dbPath); err != nil {
		return st, fmt.Errorf("snapshot: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return st, fmt.Errorf("snapshot: %w", err)
	}
	return st, nil
}

// snapshotTestHook lets tests act between the steps of an attempt.
var snapshotTestHook = func(stage string, locked bool) {}

// snapshotOnce writes the database copy (under the write lock if locked)
// and holds the files it references that are not held yet. It returns the
// content addresses of referenced files that no longer exist.
func (s *Store) snapshotOnce(ctx context.Context, dbPath string, h *holder, locked bool) ([]string, error) {
	for _, suf := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.Remove(dbPath + suf); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("snapshot: remove previous attempt: %w", err)
		}
	}
	if locked {
		unlock, err := s.lockWrites(ctx)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	snapshotTestHook("before-copy", locked)
	if err := s.vacuumInto(ctx, dbPath); err != nil {
		return nil, err
	}
	snapshotTestHook("after-copy", locked)
	if err := os.Chmod(dbPath, 0o600); err != nil { // the copy holds password hashes and keys
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := pruneSnapshot(ctx, dbPath); err != nil {
		return nil, err
	}
	want, err := snapshotBlobs(ctx, dbPath)
	if err != nil {
		return nil, err
	}
	var missing []string
	for sha := range want {
		if _, ok := h.held[sha]; ok {
			continue
		}
		if _, err := h.hold(sha); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				missing = append(missing, sha)
				continue
			}
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	}
	return missing, nil
}

// vacuumInto copies the database to path in one read transaction, on a
// connection of its own (the write connection belongs to the writer).
func (s *Store) vacuumInto(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", filepath.Join(s.dir, "pimail.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return fmt.Errorf("snapshot: open database: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// VACUUM INTO takes a file name literal; quote it as an SQL string.
	q := "VACUUM INTO '" + strings.ReplaceAll(path, "'", "''") + "'"
	if err := retryBusy(ctx, func() error {
		_, err := db.ExecContext(ctx, q)
		return err
	}); err != nil {
		return fmt.Errorf("snapshot: copy database: %w", err)
	}
	return nil
}

// lockWrites takes the database's write lock (BEGIN IMMEDIATE) on a
// connection of its own and returns the function that releases it.
// Writers of this and other processes wait and retry meanwhile.
func (s *Store) lockWrites(ctx context.Context) (func(), error) {
	db, err := sql.Open("sqlite", s.dsn(false))
	if err != nil {
		return nil, fmt.Errorf("snapshot: open lock connection: %w", err)
	}
	db.SetMaxOpenConns(1)
	var tx *sql.Tx
	lctx, cancel := context.WithTimeout(ctx, s.opts.BusyTimeout)
	defer cancel()
	if err := retryBusy(lctx, func() error {
		var err error
		tx, err = db.BeginTx(ctx, nil) // _txlock=immediate: BEGIN IMMEDIATE
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("snapshot: take the write lock: %w", err)
	}
	return func() {
		_ = tx.Rollback()
		_ = db.Close()
	}, nil
}

// liveBlobs lists the content addresses of the referenced blobs that have
// a file (the others are in the database).
func (s *Store) liveBlobs(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT sha256 FROM blobs WHERE refcount > 0 AND id NOT IN (SELECT blob_id FROM blob_data)")
	if err != nil {
		return nil, fmt.Errorf("snapshot: list blobs: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			return nil, fmt.Errorf("snapshot: list blobs: %w", err)
		}
		out = append(out, sha)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("snapshot: list blobs: %w", err)
	}
	return out, nil
}

// pruneSnapshot removes the blob rows of the copy that nothing references
// (the collector's next pass in the live store). Foreign keys are on, so a
// row that is still referenced despite its count is left alone.
func pruneSnapshot(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		return fmt.Errorf("snapshot: open copy: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DELETE FROM blobs WHERE refcount <= 0 AND id NOT IN (SELECT blob_id FROM mail) AND id NOT IN (SELECT blob_id FROM queue)"); err != nil {
		return fmt.Errorf("snapshot: prune copy: %w", err)
	}
	return nil
}

// snapshotBlobs lists the content addresses and sizes of a copy's blobs
// that have a file.
func snapshotBlobs(ctx context.Context, path string) (map[string]int64, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		return nil, fmt.Errorf("snapshot: open copy: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT sha256, size FROM blobs WHERE id NOT IN (SELECT blob_id FROM blob_data)")
	if err != nil {
		return nil, fmt.Errorf("snapshot: list blobs of copy: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var sha string
		var size int64
		if err := rows.Scan(&sha, &size); err != nil {
			return nil, fmt.Errorf("snapshot: list blobs of copy: %w", err)
		}
		if len(sha) != 64 || !isHex(sha) {
			return nil, fmt.Errorf("snapshot: blob row with bad content address %q", sha)
		}
		out[sha] = size
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("snapshot: list blobs of copy: %w", err)
	}
	return out, nil
}

// holder links or copies message files into the snapshot.
type holder struct {
	src, dst       string
	copy           bool
	held           map[string]int64 // sha → size of the files in dst
	dirs           map[string]bool  // <hh> directories created in dst
	linked, copied int
}

// hold puts the file sha into the snapshot. The error wraps os.ErrNotExist
// when the store has no such file (any more).
func (h *holder) hold(sha string) (int64, error) {
	if size, ok := h.held[sha]; ok {
		return size, nil
	}
	if h.dirs == nil {
		h.dirs = map[string]bool{}
	}
	sub := filepath.Join(h.dst, sha[:2])
	if !h.dirs[sha[:2]] {
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return 0, fmt.Errorf("create %s: %w", sub, err)
		}
		h.dirs[sha[:2]] = true
	}
	from, to := filepath.Join(h.src, sha[:2], sha), filepath.Join(sub, sha)
	if !h.copy {
		err := os.Link(from, to)
		if err == nil {
			fi, err := os.Stat(to)
			if err != nil {
				return 0, fmt.Errorf("stat linked blob: %w", err)
			}
			h.held[sha] = fi.Size()
			h.linked++
			return fi.Size(), nil
		}
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("link blob %s: %w", sha, err)
		}
		// Another file system, or one without hard links: copy from now on.
		if !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EMLINK) && !errors.Is(err, syscall.ENOTSUP) {
			return 0, fmt.Errorf("link blob %s: %w", sha, err)
		}
		h.copy = true
	}
	size, err := CopyBlobFile(from, to, sha)
	if err != nil {
		return 0, err
	}
	h.held[sha] = size
	h.copied++
	return size, nil
}

// syncAll fsyncs the blob directories of the snapshot (copied files are
// synced as they are written; a link is a directory entry).
func (h *holder) syncAll() error {
	for hh := range h.dirs {
		if err := syncDir(filepath.Join(h.dst, hh)); err != nil {
			return err
		}
	}
	return syncDir(h.dst)
}

// CopyBlobFile copies a message file, fsyncs the copy and checks that its
// content hashes to sha (the name under which the store keeps it). The
// error wraps os.ErrNotExist when from does not exist.
func CopyBlobFile(from, to, sha string) (int64, error) {
	in, err := os.Open(from)
	if err != nil {
		return 0, fmt.Errorf("open blob %s: %w", sha, err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create copy of blob %s: %w", sha, err)
	}
	ok := false
	defer func() {
		if !ok {
			out.Close()
			os.Remove(to)
		}
	}()
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, sum), in)
	if err != nil {
		return 0, fmt.Errorf("copy blob %s: %w", sha, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != sha {
		return 0, fmt.Errorf("copy blob %s: content hashes to %s: the file is damaged", sha, got)
	}
	if err := out.Sync(); err != nil {
		return 0, fmt.Errorf("fsync copy of blob %s: %w", sha, err)
	}
	if err := out.Close(); err != nil {
		return 0, fmt.Errorf("close copy of blob %s: %w", sha, err)
	}
	ok = true
	return n, nil
}

// emptyDir creates dir or checks that it is empty.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s for fsync: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}
