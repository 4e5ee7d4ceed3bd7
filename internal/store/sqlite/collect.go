package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// collectBatch bounds the blobs removed in one write request, so that the
// collector never holds the write lock for long.
const collectBatch = 500

// releaseBatch bounds the blob_release rows applied in one write request.
const releaseBatch = 2000

// orphanInterval is how often the background collector looks for files
// without rows (crash leftovers), besides once at Open.
const orphanInterval = time.Hour

// kickCollector asks the background collector for a pass soon (after an
// expunge or delete). It never blocks.
func (s *Store) kickCollector() {
	select {
	case s.collect <- struct{}{}:
	default:
	}
}

// collector removes unreferenced blobs every CollectInterval and when kicked,
// and orphan files every orphanInterval.
func (s *Store) collector() {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.CollectInterval)
	defer tick.Stop()
	lastOrphans := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		case <-s.collect:
			// Let an expunge burst settle so that one pass takes it all.
			t := time.NewTimer(time.Second)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if err := s.collectOnce(); err != nil && !errors.Is(err, errClosed) {
			s.log.Warn("collecting unreferenced blobs", "err", err)
		}
		if time.Since(lastOrphans) >= orphanInterval {
			lastOrphans = time.Now()
			if err := s.collectOrphans(); err != nil && !errors.Is(err, errClosed) {
				s.log.Warn("collecting orphan blob files", "err", err)
			}
		}
	}
}

// collectOnce deletes blob rows whose refcount reached zero and their files.
// It runs as write requests: the file is removed under the write lock, so a
// concurrent delivery of the same content either committed its reference
// first (then the blob is not collected) or finds its file gone in its own
// transaction and writes it again.
func (s *Store) collectOnce() error {
	if err := s.applyReleases(); err != nil {
		return err
	}
	total := 0
	for range 1000 { // bounded: at most 500k blobs per pass
		n := 0
		err := s.writeAfterDurable(context.Background(), func(w *wtx) error { // files go: earlier relaxed expunges must be on disk
			n = 0
			rows, err := w.query("SELECT id, sha256 FROM blobs WHERE refcount <= 0 LIMIT ?", collectBatch)
			if err != nil {
				return fmt.Errorf("list unreferenced blobs: %w", err)
			}
			type victim struct {
				id  int64
				sha string
			}
			var vs []victim
			for rows.Next() {
				var v victim
				if err := rows.Scan(&v.id, &v.sha); err != nil {
					rows.Close()
					return fmt.Errorf("list unreferenced blobs: %w", err)
				}
				vs = append(vs, v)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("list unreferenced blobs: %w", err)
			}
			ids := make([]int64, 0, len(vs)) // for the full-text index
			for _, v := range vs {
				ids = append(ids, v.id)
				if err := os.Remove(s.blobPath(v.sha)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("remove blob file: %w", err)
				}
				if _, err := w.exec("DELETE FROM blobs WHERE id = ? AND refcount <= 0", v.id); err != nil {
					return fmt.Errorf("delete blob row: %w", err)
				}
			}
			n = len(vs)
			return s.forgetIndexed(w, ids) // index rows go lazily (fts.go)
		})
		if err != nil {
			return err
		}
		total += n
		if n < collectBatch {
			break
		}
	}
	if total > 0 {
		s.log.Debug("collected unreferenced blobs", "count", total)
	}
	return nil
}

// applyReleases subtracts the references that expunges dropped
// (blob_release, written by expunged in mutate.go, schema step 8) from
// blobs.refcount, releaseBatch rows per write request, so that the
// collection that follows sees the blobs they left unreferenced. It
// removes no file, so it needs no durable predecessor: a relaxed expunge
// lost to a power failure loses its release rows with its deletions, and
// its commit durably orders after every expunge it applies.
func (s *Store) applyReleases() error {
	for range 1000 { // bounded: at most 2M references per pass
		n := int64(0)
		err := s.write(context.Background(), func(w *wtx) error {
			n = 0
			last := int64(math.MaxInt64)
			err := w.queryRow("SELECT rowid FROM blob_release ORDER BY rowid LIMIT 1 OFFSET ?", releaseBatch-1).Scan(&last)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("list blob releases: %w", err)
			}
			if _, err := w.exec(`UPDATE blobs SET refcount = refcount - c.n FROM
				(SELECT blob_id AS id, count(*) AS n FROM blob_release WHERE rowid <= ? GROUP BY blob_id) AS c
				WHERE blobs.id = c.id`, last); err != nil {
				return fmt.Errorf("release blobs: %w", err)
			}
			res, err := w.exec("DELETE FROM blob_release WHERE rowid <= ?", last)
			if err != nil {
				return fmt.Errorf("release blobs: %w", err)
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return err
		}
		if n < releaseBatch {
			return nil
		}
	}
	return nil
}

// collectOrphans removes message files that have no blob row and temporary
// files, both only when older than OrphanGrace (a younger one may belong to a
// delivery of this or another process that has not committed yet). The
// existence check and the removal happen in a write request.
func (s *Store) collectOrphans() error {
	cutoff := time.Now().Add(-s.opts.OrphanGrace)
	tmpDir := filepath.Join(s.blobDir, "tmp")
	if ents, err := os.ReadDir(tmpDir); err == nil {
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
				if err := os.Remove(filepath.Join(tmpDir, e.Name())); err == nil {
					s.log.Info("removed stale temporary blob", "name", e.Name())
				}
			}
		}
	}

	// Candidates: old files whose name has no row in a read snapshot. One
	// query per <hh> directory keeps memory small and round trips few.
	var candidates []string
	subs, err := os.ReadDir(s.blobDir)
	if err != nil {
		return fmt.Errorf("list blob directory: %w", err)
	}
	for _, sub := range subs {
		hh := sub.Name()
		if !sub.IsDir() || len(hh) != 2 || !isHex(hh) {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(s.blobDir, hh))
		if err != nil {
			return fmt.Errorf("list blob directory: %w", err)
		}
		var old []string
		for _, e := range ents {
			name := e.Name()
			if len(name) != 64 || name[:2] != hh {
				continue
			}
			if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
				old = append(old, name)
			}
		}
		if len(old) == 0 {
			continue
		}
		known, err := s.knownBlobs(hh)
		if err != nil {
			return err
		}
		for _, name := range old {
			if !known[name] {
				candidates = append(candidates, name)
			}
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	// Check again and remove under the write lock.
	removed := 0
	err = s.write(context.Background(), func(w *wtx) error {
		removed = 0
		for _, sha := range candidates {
			var one int
			err := w.queryRow("SELECT 1 FROM blobs WHERE sha256 = ?", sha).Scan(&one)
			if err == nil {
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("look up blob: %w", err)
			}
			if err := os.Remove(s.blobPath(sha)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove orphan blob: %w", err)
			}
			removed++
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.log.Info("removed orphan blob files", "count", removed)
	return nil
}

// knownBlobs returns the content addresses with a row that start with hh.
func (s *Store) knownBlobs(hh string) (map[string]bool, error) {
	rows, err := s.rdb.Query("SELECT sha256 FROM blobs WHERE sha256 >= ? AND sha256 < ?", hh, hh+"g")
	if err != nil {
		return nil, fmt.Errorf("list blobs %s: %w", hh, err)
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			return nil, fmt.Errorf("list blobs %s: %w", hh, err)
		}
		known[sha] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list blobs %s: %w", hh, err)
	}
	return known, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
