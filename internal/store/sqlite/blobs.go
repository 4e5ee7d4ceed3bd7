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

	"pimail/internal/store"
)

// errBlobMissing is returned by a write request whose message file vanished
// (collected) between the caller writing it and the transaction; the caller
// writes the file again and retries.
var errBlobMissing = errors.New("blob file missing")

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
func (s *Store) writeBlob(sha string, raw []byte) error {
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

// blobSHA looks up the content address of a blob row.
func (s *Store) blobSHA(ctx context.Context, blobID int64) (string, int64, error) {
	var sha string
	var size int64
	err := s.rdb.QueryRowContext(ctx, "SELECT sha256, size FROM blobs WHERE id = ?", blobID).Scan(&sha, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("blob %d: %w", blobID, store.ErrNotFound)
	}
	if err != nil {
		return "", 0, fmt.Errorf("sqlite store: blob %d: %w", blobID, err)
	}
	return sha, size, nil
}

// OpenBlob returns the raw message bytes of a blob and their size.
func (s *Store) OpenBlob(ctx context.Context, blobID int64) (io.ReadSeekCloser, int64, error) {
	sha, size, err := s.blobSHA(ctx, blobID)
	if err != nil {
		return nil, 0, err
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

// ReadBlob returns the raw message bytes of a blob.
func (s *Store) ReadBlob(ctx context.Context, blobID int64) ([]byte, error) {
	sha, _, err := s.blobSHA(ctx, blobID)
	if err != nil {
		return nil, err
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
