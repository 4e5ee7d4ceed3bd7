package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

const (
	// indexBatch is the number of blobs indexed per transaction of
	// index.db: FTS5 inserts cost far less in batches (DESIGN: 0.3–0.4 ms
	// per message at 100 per transaction).
	indexBatch = 250
	// forgetBatch bounds the rows deleted from the index per transaction.
	forgetBatch = 500
	// indexPoll is how often the indexer looks for new blobs when idle.
	indexPoll = 500 * time.Millisecond
	// indexRetry is the pause after a failed batch.
	indexRetry = 5 * time.Second
	// indexYield is how long the indexer stays out of the way after the
	// writer committed writes of several sessions at once, and maxIndexLag
	// how long it may stay out of the way in all: under concurrent
	// deliveries the CPU goes to accepting mail first, and the index
	// catches up when the burst ends (searches meanwhile read the messages
	// not yet indexed, see search_text.go). A single session (one APPEND
	// after another) never makes it wait.
	indexYield  = 200 * time.Millisecond
	maxIndexLag = time.Minute
	// At a trickle of mail the indexer waits until indexMinBatch blobs
	// are pending or the oldest has waited indexMaxDelay: every index
	// commit writes a new FTS5 segment and later merges it, so indexing
	// one message a second wrote about 130 KB per message, half of
	// everything the server wrote. Searches read pending messages, and
	// WaitIndexed asks for an immediate run.
	indexMinBatch = 64
	indexMaxDelay = 5 * time.Second
)

// indexWALFold is the size of index.db-wal from which the indexer, once
// caught up, folds the WAL into index.db and truncates it (see indexer);
// a variable for tests.
var indexWALFold int64 = 1 << 20

// indexOptimizeMin is the fewest newly indexed blobs after which the
// indexer optimizes the index (optimizeIndex); a variable for tests.
var indexOptimizeMin int64 = 1000

// startIndexer starts the background indexer goroutine (part of s.wg).
func (s *Store) startIndexer() {
	s.fts = newFTSIndex(s.dir)
	s.wg.Add(1)
	go s.indexer()
}

// indexer keeps index.db up to date: it opens (or rebuilds) the file,
// then indexes new blobs in batches and removes rows of collected blobs.
func (s *Store) indexer() {
	defer s.wg.Done()
	ix := s.fts
	defer ix.close()
	for attempt := 0; ; attempt++ {
		maxBlob, err := s.maxBlobID(s.ctx)
		if err == nil {
			var hwm int64
			hwm, err = ix.open(s.ctx, maxBlob)
			if errors.Is(err, errIndexRebuilt) {
				s.log.Warn("full-text index", "err", err)
				err = nil
			}
			if err == nil {
				ix.hwm.Store(hwm)
				break
			}
		}
		s.log.Error("full-text index unavailable; searches read messages", "err", err, "path", ix.path)
		if !sleepCtx(s.ctx, indexRetry*time.Duration(min(attempt+1, 12))) {
			return
		}
	}
	s.log.Debug("full-text index open", "path", ix.path, "hwm", ix.hwm.Load())
	tick := time.NewTicker(indexPoll)
	defer tick.Stop()
	dirty := false             // batches written since the last checkpoint
	var sinceOptimize int64    // blob ids indexed since the last optimize
	var behind time.Time       // when the indexer last started deferring, zero when caught up
	var pendingSince time.Time // when blobs were first seen pending, zero when caught up
	kicked := false            // kickNow: a caller wants the pending blobs indexed now
	wait := func() bool {
		select {
		case <-s.ctx.Done():
			return false
		case <-tick.C:
			ix.vocab.dropIdle()
		case <-ix.kick:
			kicked = true
		}
		return true
	}
	for {
		if ix.broken.Load() {
			if !s.rebuildIndex() {
				return
			}
		}
		if now := time.Now(); now.UnixNano() < s.busyUntil.Load() {
			if behind.IsZero() {
				behind = now
			}
			if now.Sub(behind) < maxIndexLag {
				if !sleepCtx(s.ctx, time.Duration(s.busyUntil.Load()-now.UnixNano())) {
					return
				}
				continue
			}
		}
		if maxBlob, err := s.maxBlobID(s.ctx); err == nil {
			if n := maxBlob - ix.hwm.Load(); n > 0 && n < indexMinBatch {
				if pendingSince.IsZero() {
					pendingSince = time.Now()
				}
				if !kicked && time.Since(pendingSince) < indexMaxDelay {
					if !wait() {
						return
					}
					continue
				}
			}
		}
		h0 := ix.hwm.Load()
		more, err := s.indexOnce(s.ctx)
		if h := ix.hwm.Load(); h != h0 {
			dirty = true
			sinceOptimize += max(0, h-h0)
		}
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("full-text indexing", "err", err)
			if isCorrupt(err) {
				ix.broken.Store(true)
			}
			if !sleepCtx(s.ctx, indexRetry) {
				return
			}
			continue
		}
		if more {
			continue
		}
		behind, pendingSince, kicked = time.Time{}, time.Time{}, false
		ix.known = nil // caught up: keep no texts alive
		if dirty {
			dirty = false
			if db := ix.db.Load(); db != nil {
				if sinceOptimize >= max(indexOptimizeMin, ix.hwm.Load()/10) {
					sinceOptimize = 0
					s.optimizeIndex(db)
				}
				// Caught up after a burst: fold the WAL into index.db,
				// so that the files take the index's size, not the
				// index's plus the burst's batches. Not after every
				// small batch of a trickle: a checkpoint writes each
				// page again, and the pages that every batch changes
				// are written once for all the batches since the last
				// one.
				if fi, err := os.Stat(ix.path + "-wal"); err == nil && fi.Size() >= indexWALFold {
					if _, err := db.ExecContext(s.ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil && s.ctx.Err() == nil {
						s.log.Debug("full-text index checkpoint", "err", err)
					}
				}
			}
		}
		if !wait() {
			return
		}
	}
}

// optimizeIndex merges the index's segments into one. Every batch writes
// a segment and FTS5 merges them only part of the way; a search asks each
// segment for each word, so after a bulk load a word in a quarter of the
// 21k mailbox's messages took 24 instead of 17 ms, and the two-letter
// needle "th" 360 instead of 150 ms. It rewrites the whole index (1 s
// for the 21k mailbox's 26 MB here), so the indexer runs it when it has
// caught up after indexing at least indexOptimizeMin blobs and a tenth
// of the index. Searches meanwhile read the index as it was (WAL).
func (s *Store) optimizeIndex(db *sql.DB) {
	t0 := time.Now()
	if _, err := db.ExecContext(s.ctx, "INSERT INTO fts (fts) VALUES ('optimize')"); err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("full-text index optimize", "err", err)
		}
		return
	}
	if _, err := db.ExecContext(s.ctx, "PRAGMA incremental_vacuum"); err != nil && s.ctx.Err() == nil {
		s.log.Warn("full-text index vacuum", "err", err)
	}
	s.fts.optimized.Add(1)
	s.log.Debug("full-text index optimized", "took", time.Since(t0))
}

// rebuildIndex replaces a corrupt index file with an empty one; the
// indexer then indexes every blob again. Searches scan meanwhile.
func (s *Store) rebuildIndex() bool {
	ix := s.fts
	ix.hwm.Store(0)
	ix.close()
	ix.broken.Store(false)
	os.Remove(ix.path) // the open below recreates it
	for _, suf := range []string{"-wal", "-shm"} {
		os.Remove(ix.path + suf)
	}
	ix.mu.Lock()
	ix.forget = nil
	ix.mu.Unlock()
	for attempt := 1; ; attempt++ {
		maxBlob, err := s.maxBlobID(s.ctx)
		if err == nil {
			var hwm int64
			if hwm, err = ix.open(s.ctx, maxBlob); err == nil || errors.Is(err, errIndexRebuilt) {
				ix.hwm.Store(hwm)
				s.log.Warn("full-text index rebuilt from scratch", "path", ix.path)
				return true
			}
		}
		s.log.Error("rebuilding full-text index", "err", err)
		if !sleepCtx(s.ctx, indexRetry*time.Duration(min(attempt, 12))) {
			return false
		}
	}
}

func (s *Store) maxBlobID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.rdb.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) FROM blobs").Scan(&id); err != nil {
		return 0, fmt.Errorf("highest blob id: %w", err)
	}
	return id, nil
}

// indexDoc is one blob's index terms: its distinct header and body words.
type indexDoc struct {
	id   int64
	h, b string
}

// indexOnce indexes up to indexBatch new blobs and removes up to
// forgetBatch collected ones in one transaction of index.db. more says
// that work is left.
func (s *Store) indexOnce(ctx context.Context) (more bool, err error) {
	ix := s.fts
	db := ix.db.Load()
	if db == nil {
		return false, nil
	}
	ix.mu.Lock()
	epoch := ix.epoch
	lo := ix.hwm.Load()
	forget := ix.forget[:min(len(ix.forget), forgetBatch)]
	ix.mu.Unlock()

	batch := map[string]struct{}{}
	docs, last, err := s.loadDocs(ctx, lo, indexBatch, batch)
	if err != nil {
		return false, err
	}
	if len(docs) == 0 && last == lo && len(forget) == 0 {
		return false, nil
	}
	// A collection whose transaction failed after it reported its blobs
	// leaves them in place: keep their rows.
	gone, err := s.missingBlobs(ctx, forget)
	if err != nil {
		return false, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin index batch: %w", err)
	}
	defer tx.Rollback()
	for _, id := range gone {
		if _, err := tx.ExecContext(ctx, "DELETE FROM fts WHERE rowid = ?", id); err != nil {
			return false, fmt.Errorf("remove collected blob %d from index: %w", id, err)
		}
	}
	chunkID, chunk, err := addWords(ctx, tx, batch, ix.known, ix.chunkID, ix.chunk)
	if err != nil {
		return false, err
	}
	maxRow := ix.maxRow
	for _, d := range docs {
		if d.id <= maxRow {
			// A row left from a collected blob whose id came back.
			if _, err := tx.ExecContext(ctx, "DELETE FROM fts WHERE rowid = ?", d.id); err != nil {
				return false, fmt.Errorf("replace index row %d: %w", d.id, err)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO fts (rowid, h, b) VALUES (?, ?, ?)", d.id, d.h, d.b); err != nil {
			return false, fmt.Errorf("index blob %d: %w", d.id, err)
		}
		maxRow = max(maxRow, d.id)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE meta SET value = ? WHERE key = 'hwm'", last); err != nil {
		return false, fmt.Errorf("store high-water mark: %w", err)
	}
	// Commit under mu: a collection that lowered hwm meanwhile (a new
	// epoch) may have made ids of this batch stale; then start over.
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.epoch != epoch {
		return true, nil
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit index batch: %w", err)
	}
	ix.maxRow = maxRow
	ix.chunkID, ix.chunk = chunkID, chunk
	ix.known = batch
	ix.hwm.Store(last)
	ix.forget = ix.forget[len(forget):]
	return len(docs) == indexBatch || len(ix.forget) > 0, nil
}

// addWords records the words of a batch that the index has not seen
// before: in words, and appended to the vocabulary's last row (a new row
// once it holds vocabChunk bytes). known are words committed before (the
// previous batch's): most words of a batch are, and skipping them saves
// an INSERT each. It returns the last row as written; chunk, the last row
// as committed, is not modified.
func addWords(ctx context.Context, tx *sql.Tx, batch, known map[string]struct{}, chunkID int64, chunk []byte) (int64, []byte, error) {
	st, err := tx.PrepareContext(ctx, "INSERT OR IGNORE INTO words (w) VALUES (?)")
	if err != nil {
		return 0, nil, fmt.Errorf("index words: %w", err)
	}
	defer st.Close()
	chunk = slices.Clip(chunk) // appends copy: the committed row stays as it was
	added := false
	for w := range batch {
		if _, ok := known[w]; ok {
			continue
		}
		r, err := st.ExecContext(ctx, w)
		if err != nil {
			return 0, nil, fmt.Errorf("index word: %w", err)
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			continue
		}
		if len(chunk)+len(w) >= vocabChunk && len(chunk) > 0 {
			if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO vocab (id, data) VALUES (?, ?)", chunkID, chunk); err != nil {
				return 0, nil, fmt.Errorf("write vocabulary: %w", err)
			}
			chunkID, chunk = chunkID+1, nil
		}
		chunk = append(chunk, w...)
		chunk = append(chunk, '\n')
		added = true
	}
	if added {
		if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO vocab (id, data) VALUES (?, ?)", chunkID, chunk); err != nil {
			return 0, nil, fmt.Errorf("write vocabulary: %w", err)
		}
	}
	return chunkID, chunk, nil
}

// missingBlobs returns the ids that have no blob row.
func (s *Store) missingBlobs(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	j, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("encode blob ids: %w", err)
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT id FROM blobs WHERE id IN (SELECT value FROM json_each(?))", string(j))
	if err != nil {
		return nil, fmt.Errorf("check collected blobs: %w", err)
	}
	defer rows.Close()
	exists := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("check collected blobs: %w", err)
		}
		exists[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check collected blobs: %w", err)
	}
	var gone []int64
	for _, id := range ids {
		if !exists[id] {
			gone = append(gone, id)
		}
	}
	return gone, nil
}

// loadDocs reads and extracts up to limit blobs with id > after, in id
// order, and adds their words to batch. last is the id up to which blobs
// were looked at.
func (s *Store) loadDocs(ctx context.Context, after int64, limit int, batch map[string]struct{}) (docs []indexDoc, last int64, err error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT id, sha256, parsed FROM blobs WHERE id > ? ORDER BY id LIMIT ?", after, limit)
	if err != nil {
		return nil, after, fmt.Errorf("list blobs to index: %w", err)
	}
	type pending struct {
		id  int64
		sha string
		pj  []byte
	}
	var ps []pending
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.id, &p.sha, &p.pj); err != nil {
			rows.Close()
			return nil, after, fmt.Errorf("list blobs to index: %w", err)
		}
		ps = append(ps, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, after, fmt.Errorf("list blobs to index: %w", err)
	}
	last = after
	for _, p := range ps {
		last = p.id
		raw, release, err := s.mapRaw(s.ctx, p.id, p.sha)
		if errors.Is(err, os.ErrNotExist) {
			continue // collected meanwhile
		}
		if err != nil {
			return nil, after, fmt.Errorf("read blob %d to index: %w", p.id, err)
		}
		text := store.ExtractSearchableText(raw, decodeParsed(p.pj))
		release()
		w := &s.fts.words
		docs = append(docs, indexDoc{id: p.id, h: w.terms(text.Header, batch), b: w.terms(text.Body, batch)})
	}
	return docs, last, nil
}

// decodeParsed decodes a stored message.Parsed; nil when unusable (the
// text extraction then parses the message again).
func decodeParsed(pj []byte) *message.Parsed {
	p := &message.Parsed{}
	if err := json.Unmarshal(pj, p); err != nil || p.Body == nil {
		return nil
	}
	return p
}

// sleepCtx waits d or until ctx ends; false means ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// WaitIndexed blocks until every blob stored so far is in the full-text
// index, or ctx ends. For tests and benchmarks; searches never need it.
func (s *Store) WaitIndexed(ctx context.Context) error {
	if s.fts == nil {
		return fmt.Errorf("sqlite store: no full-text indexer in this process: %w", store.ErrInvalid)
	}
	want, err := s.maxBlobID(ctx)
	if err != nil {
		return fmt.Errorf("sqlite store: %w", err)
	}
	for s.fts.hwm.Load() < want {
		s.fts.kickNow()
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// IndexSize returns the bytes of index.db (with its WAL) and of the
// message files, to report the index's size relative to the mail.
func (s *Store) IndexSize(ctx context.Context) (index, mail int64, err error) {
	for _, suf := range []string{"", "-wal"} {
		if fi, err := os.Stat(filepath.Join(s.dir, "index.db"+suf)); err == nil {
			index += fi.Size()
		}
	}
	if err := s.rdb.QueryRowContext(ctx, "SELECT coalesce(sum(size), 0) FROM blobs").Scan(&mail); err != nil {
		return 0, 0, fmt.Errorf("sqlite store: mail size: %w", err)
	}
	return index, mail, nil
}
