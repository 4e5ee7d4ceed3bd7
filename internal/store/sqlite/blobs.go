package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"pimail/internal/mapfile"
	"pimail/internal/store"
)

// errBlobMissing is returned by a write request whose message file vanished
// (collected) between the caller writing it and the transaction; the caller
// writes the file again and retries.
var errBlobMissing = errors.New("blob file missing")

// defaultInlineMax is Options.InlineMax's default. A message up to this
// size is kept in the database (blob_data): its bytes go into the group
// commit's transaction, made durable by the one WAL fsync of the batch,
// where a file of its own costs a create, a write, an fsync, a rename and
// a directory fsync per message — on the 2-core test machine a quarter of
// the server's CPU in SMTP ingest of 8 KB mail, most of it the file
// system allocating inodes. SQLite reads and writes blobs of this size
// about as fast as files or faster (sqlite.org, "Internal Versus External
// BLOBs"); bigger messages keep their file.
const defaultInlineMax = 128 << 10

// blobReadConns is the size of the pool that reads blob_data.
const blobReadConns = 4

// inline reports whether a message of n bytes is kept in the database.
func (s *Store) inline(n int) bool {
	return n <= s.opts.InlineMax && !testBefore(5)
}

// blobPath is the content address of a message file.
func (s *Store) blobPath(sha string) string {
	return filepath.Join(s.blobDir, sha[:2], sha)
}

func hashRaw(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// writeBlob makes sure DIR/blobs/<hh>/<sha> holds raw and is durable: it
// writes a temporary file, fsyncs it, renames it into place and fsyncs the
// directory. An existing file (same content, by its name) is kept, but its
// directory is still synced, because the delivery that created it may not
// have done so yet.
//
// A message kept in the database has no file: writeBlob does nothing, and
// ensureBlob puts its bytes into the transaction.
func (s *Store) writeBlob(sha string, raw []byte) error {
	if s.inline(len(raw)) {
		return nil
	}
	dir := filepath.Join(s.blobDir, sha[:2])
	final := filepath.Join(dir, sha)
	if _, err := os.Stat(final); err == nil {
		return syncDir(dir)
	}
	if err := os.Mkdir(dir, 0o700); err == nil {
		if err := syncDir(s.blobDir); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create blob directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Join(s.blobDir, "tmp"), sha[:16]+"-*")
	if err != nil {
		return fmt.Errorf("create temporary blob: %w", err)
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(raw); err != nil {
		return fmt.Errorf("write blob: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync blob: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close blob: %w", err)
	}
	if err := os.Rename(tmpName, final); err != nil {
		return fmt.Errorf("rename blob into place: %w", err)
	}
	ok = true
	return syncDir(dir)
}

// syncDir fsyncs a directory so that entries created or renamed in it survive
// a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// bdbRow runs a constant single-row query on the blob read pool.
func (s *Store) bdbRow(ctx context.Context, q string, args ...any) *sql.Row {
	return s.queryRow(ctx, &s.bstmts, s.bdb, q, args...)
}

// readRaw returns the bytes of blob id, whose content address is sha:
// from the database when it is kept there, else from its file. A blob
// collected meanwhile gives an error wrapping os.ErrNotExist.
func (s *Store) readRaw(ctx context.Context, id int64, sha string) ([]byte, error) {
	var raw []byte
	err := s.bdbRow(ctx, "SELECT raw FROM blob_data WHERE blob_id = ?", id).Scan(&raw)
	if err == nil {
		return raw, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read blob %d: %w", id, err)
	}
	return os.ReadFile(s.blobPath(sha))
}

// mapRaw is readRaw for a reader that touches only parts of a large
// message (the word indexer reads the header and the text parts): a
// message file is mapped instead of read, so that its attachments cost
// neither heap nor reads. release unmaps it; raw is not used after.
func (s *Store) mapRaw(ctx context.Context, id int64, sha string) (raw []byte, release func(), err error) {
	err = s.bdbRow(ctx, "SELECT raw FROM blob_data WHERE blob_id = ?", id).Scan(&raw)
	if err == nil {
		return raw, func() {}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("read blob %d: %w", id, err)
	}
	f, err := os.Open(s.blobPath(sha))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("read blob %d: %w", id, err)
	}
	raw, err = mapfile.Map(f, fi.Size(), false)
	if err != nil {
		return nil, nil, fmt.Errorf("read blob %d: %w", id, err)
	}
	return raw, func() { mapfile.Unmap(raw) }, nil
}

// blobSource looks up a blob: its content address and size, and its bytes
// when the database keeps them (nil: they are in its file).
func (s *Store) blobSource(ctx context.Context, blobID int64) (sha string, size int64, raw []byte, err error) {
	err = s.bdbRow(ctx, `SELECT b.sha256, b.size, d.raw FROM blobs b LEFT JOIN blob_data d ON d.blob_id = b.id
		WHERE b.id = ?`, blobID).Scan(&sha, &size, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil, fmt.Errorf("blob %d: %w", blobID, store.ErrNotFound)
	}
	if err != nil {
		return "", 0, nil, fmt.Errorf("sqlite store: blob %d: %w", blobID, err)
	}
	return sha, size, raw, nil
}

// OpenBlob returns the raw message bytes of a blob and their size.
func (s *Store) OpenBlob(ctx context.Context, blobID int64) (io.ReadSeekCloser, int64, error) {
	sha, size, raw, err := s.blobSource(ctx, blobID)
	if err != nil {
		return nil, 0, err
	}
	if raw != nil {
		return nopCloser{bytes.NewReader(raw)}, int64(len(raw)), nil
	}
	f, err := os.Open(s.blobPath(sha))
	if errors.Is(err, os.ErrNotExist) {
		// Collected after the last reference went away.
		return nil, 0, fmt.Errorf("blob %d: %w", blobID, store.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite store: open blob %d: %w", blobID, err)
	}
	return f, size, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// ReadBlob returns the raw message bytes of a blob.
func (s *Store) ReadBlob(ctx context.Context, blobID int64) ([]byte, error) {
	sha, _, raw, err := s.blobSource(ctx, blobID)
	if err != nil || raw != nil {
		return raw, err
	}
	b, err := os.ReadFile(s.blobPath(sha))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("blob %d: %w", blobID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite store: read blob %d: %w", blobID, err)
	}
	return b, nil
}

// readBlobPrefix fills dst from the start of blob id (content address sha)
// and returns how many bytes it read: from its file, else from the
// database. A collected blob gives an error wrapping store.ErrNotFound.
func (s *Store) readBlobPrefix(ctx context.Context, id int64, sha string, dst []byte) (int, error) {
	n, err := readPrefix(s.blobPath(sha), dst)
	if !errors.Is(err, store.ErrNotFound) {
		return n, err
	}
	raw, rerr := s.readRaw(ctx, id, sha)
	if errors.Is(rerr, os.ErrNotExist) {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	return copy(dst, raw), nil
}
