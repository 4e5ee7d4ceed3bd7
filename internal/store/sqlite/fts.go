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
	"sync/atomic"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The full-text index lives in its own database file, DIR/index.db: it is
// derived data (rebuilt from the blobs when missing, corrupt or of another
// layout) and its writes never take the lock of pimail.db.
//
//	meta (key, value)         'hwm': the highest blob id indexed; every blob
//	                          with id <= hwm is in fts (or gone)
//	fts  (h, b)               FTS5, contentless, rowid = blobs.id,
//	                          tokenize=ascii, detail=column: the distinct
//	                          words of the blob's searchable header (h) and
//	                          body (b) text (fts_terms.go)
//	words (w)                 every distinct word ever indexed, to tell new
//	                          words from known ones
//	vocab (id, data)          the same words, newline-terminated, appended
//	                          to rows of about 64 KB: search scans them for
//	                          the words containing a needle
//
// Layout, from measurement (21,282 messages of the linux-mips mailbox,
// 74.7 MB; docs/benchmarks.md, IMAP): words with detail=column take 24.5
// MB once optimized (33 % of the mail) and 0.6 ms a message to extract
// and index. A needle without separators is answered exactly from the
// index: the vocabulary scan (242,000 words, 2.6 MB) and FTS5 queries for
// the blobs holding any of the words found, with no message read: 5 ms
// for a word in 1 % of the messages, 17 ms for one in a quarter. The
// layout before (the distinct byte trigrams, detail=none, 44 % of the
// mail, 1.1 ms a message) found a superset that search verified by
// decoding every candidate: 112 and 502 ms. FTS5's own trigram tokenizer
// with detail=full answers substrings exactly too, at 311 % of the mail.
const (
	ftsLayout = "fts5 words h b ascii detail=column v3"
	ftsSchema = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(h, b, content='', contentless_delete=1,
	tokenize='ascii', detail=column);
CREATE TABLE IF NOT EXISTS words (w TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vocab (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
`
)

// ftsIndex is the handle on DIR/index.db and the indexer's shared state.
type ftsIndex struct {
	path string
	db   atomic.Pointer[sql.DB] // nil while (re)opening
	// hwm: every blob with id <= hwm is indexed (or no longer exists);
	// searches use FTS only for those and scan the others.
	hwm atomic.Int64
	// maxRow is the highest rowid ever inserted (indexer goroutine only):
	// an insert at or below it first deletes a stale row.
	maxRow int64

	mu sync.Mutex
	// forget lists blob ids deleted from pimail.db whose rows are still in
	// fts; the indexer removes them lazily, in batches.
	forget []int64
	// epoch counts lowerings of hwm (see forgetBlobs); a batch that saw
	// another epoch is retried.
	epoch uint64
	// broken asks the indexer to rebuild the index file.
	broken atomic.Bool
	// kick asks the indexer to index what is pending now (kickNow).
	kick chan struct{}

	// Indexer goroutine only: words turns a blob's text into its terms;
	// chunkID and chunk are the last vocab row as committed.
	words   wordSet
	chunkID int64
	chunk   []byte
	// known holds the words of the last batch committed to this file
	// (addWords); nil once the indexer has caught up.
	known map[string]struct{}

	// vocab is the searches' copy of the vocabulary (fts_terms.go).
	vocab vocabCache
	// optimized counts optimizeIndex runs.
	optimized atomic.Int64
}

func newFTSIndex(dir string) *ftsIndex {
	return &ftsIndex{path: filepath.Join(dir, "index.db"), kick: make(chan struct{}, 1)}
}

// dsn opens index.db in WAL mode. synchronous=NORMAL: a crash may lose the
// last batches, and the high-water mark committed with them, so they are
// indexed again.
func (ix *ftsIndex) dsn() string {
	return ix.path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
}

// open opens (creating or rebuilding) index.db and returns the persisted
// high-water mark, clamped to maxBlob: ids above the largest existing blob
// may be handed out again by SQLite, so their rows are stale and removed.
func (ix *ftsIndex) open(ctx context.Context, maxBlob int64) (int64, error) {
	hwm, err := ix.tryOpen(ctx, maxBlob)
	if err == nil {
		return hwm, nil
	}
	// Derived data: set the broken file aside and start over.
	aside := fmt.Sprintf("%s.broken-%s", ix.path, time.Now().UTC().Format("20060102T150405"))
	if rerr := os.Rename(ix.path, aside); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return 0, fmt.Errorf("full-text index %s unusable (%v) and cannot be moved aside: %w", ix.path, err, rerr)
	}
	for _, suf := range []string{"-wal", "-shm"} {
		os.Remove(ix.path + suf)
	}
	hwm, err2 := ix.tryOpen(ctx, maxBlob)
	if err2 != nil {
		return 0, fmt.Errorf("full-text index %s: create after %v: %w", ix.path, err, err2)
	}
	return hwm, fmt.Errorf("full-text index was unusable, moved to %s and rebuilt: %w", aside, errIndexRebuilt)
}

// errIndexRebuilt marks an open that had to start a new index.
var errIndexRebuilt = errors.New("rebuilding")

func (ix *ftsIndex) tryOpen(ctx context.Context, maxBlob int64) (int64, error) {
	db, err := sql.Open("sqlite", ix.dsn())
	if err != nil {
		return 0, fmt.Errorf("open: %w", err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	hwm, err := ix.prepare(ctx, db, maxBlob)
	if err != nil {
		db.Close()
		return 0, err
	}
	ix.db.Store(db)
	return hwm, nil
}

// prepare creates the schema, drops an index of another layout and reads
// and clamps the high-water mark.
func (ix *ftsIndex) prepare(ctx context.Context, db *sql.DB, maxBlob int64) (int64, error) {
	var layout string
	err := db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'layout'").Scan(&layout)
	if err != nil && !errors.Is(err, sql.ErrNoRows) && !strings.Contains(err.Error(), "no such table") {
		return 0, fmt.Errorf("read layout: %w", err)
	}
	if layout != "" && layout != ftsLayout {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS fts; DROP TABLE IF EXISTS words; DROP TABLE IF EXISTS vocab; DELETE FROM meta"); err != nil {
			return 0, fmt.Errorf("drop index of layout %q: %w", layout, err)
		}
	}
	// optimizeIndex hands the pages of the segments it merged back to the
	// file system (incremental_vacuum). The mode is set before the first
	// table, or by a VACUUM of a file emptied above.
	var vacuum int
	if err := db.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&vacuum); err != nil {
		return 0, fmt.Errorf("read auto_vacuum: %w", err)
	}
	if vacuum != 2 {
		if _, err := db.ExecContext(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
			return 0, fmt.Errorf("set auto_vacuum: %w", err)
		}
		if _, err := db.ExecContext(ctx, "VACUUM"); err != nil {
			return 0, fmt.Errorf("vacuum for auto_vacuum: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx, ftsSchema); err != nil {
		return 0, fmt.Errorf("create schema: %w", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT OR IGNORE INTO meta (key, value) VALUES ('layout', ?), ('hwm', 0)", ftsLayout); err != nil {
		return 0, fmt.Errorf("init meta: %w", err)
	}
	var hwm int64
	if err := db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'hwm'").Scan(&hwm); err != nil {
		return 0, fmt.Errorf("read high-water mark: %w", err)
	}
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(rowid), 0) FROM fts").Scan(&ix.maxRow); err != nil {
		return 0, fmt.Errorf("read highest row: %w", err)
	}
	ix.chunkID, ix.chunk, ix.known = 1, nil, nil
	err = db.QueryRowContext(ctx, "SELECT id, data FROM vocab ORDER BY id DESC LIMIT 1").Scan(&ix.chunkID, &ix.chunk)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read vocabulary: %w", err)
	}
	if hwm > maxBlob || ix.maxRow > maxBlob {
		// Blobs above maxBlob were collected (their ids may come back).
		if _, err := db.ExecContext(ctx, "DELETE FROM fts WHERE rowid > ?", maxBlob); err != nil {
			return 0, fmt.Errorf("drop stale rows: %w", err)
		}
		hwm = min(hwm, maxBlob)
		ix.maxRow = min(ix.maxRow, maxBlob)
		if _, err := db.ExecContext(ctx, "UPDATE meta SET value = ? WHERE key = 'hwm'", hwm); err != nil {
			return 0, fmt.Errorf("clamp high-water mark: %w", err)
		}
	}
	return hwm, nil
}

// kickNow asks the indexer to index the pending blobs without waiting for
// a full batch (it still stays out of the way of concurrent deliveries).
func (ix *ftsIndex) kickNow() {
	select {
	case ix.kick <- struct{}{}:
	default:
	}
}

func (ix *ftsIndex) close() error {
	if db := ix.db.Swap(nil); db != nil {
		return db.Close()
	}
	return nil
}

// forgetBlobs is called by the collector inside its write transaction,
// before the commit, with the blob ids it deletes and the largest blob id
// that remains. Rows are removed later by the indexer. SQLite hands out
// max(id)+1 for a new row, so ids above maxLeft come back: hwm drops to
// maxLeft at once, before any new blob can take such an id, and searches
// ignore index rows above it until they are replaced.
func (ix *ftsIndex) forgetBlobs(ids []int64, maxLeft int64) {
	if ix == nil || len(ids) == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.forget = append(ix.forget, ids...)
	for _, id := range ids {
		if id > maxLeft {
			ix.epoch++
			if ix.hwm.Load() > maxLeft {
				ix.hwm.Store(maxLeft)
			}
			break
		}
	}
}

// isCorrupt reports errors that mean the index file is unusable.
func isCorrupt(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return true
		}
	}
	return false
}

// forgetIndexed tells the indexer, inside the collector's write
// transaction, that the blobs ids are being deleted.
func (s *Store) forgetIndexed(w *wtx, ids []int64) error {
	if s.fts == nil || len(ids) == 0 {
		return nil
	}
	var maxLeft int64
	if err := w.queryRow("SELECT coalesce(max(id), 0) FROM blobs").Scan(&maxLeft); err != nil {
		return fmt.Errorf("highest remaining blob: %w", err)
	}
	s.fts.forgetBlobs(ids, maxLeft)
	return nil
}
