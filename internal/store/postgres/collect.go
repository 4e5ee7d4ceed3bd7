package postgres

import (
	"context"
	"time"
)

// Blobs are reference-counted: blobs.refcount counts the mail rows and
// queue entries that hold one. Expunges and removals only decrement it;
// the collector deletes the rows that reached zero (with their data,
// parse and search text, by ON DELETE CASCADE). It skips rows another
// transaction holds (a delivery of the same content adding a reference),
// and re-checks the count under the row's lock, so a blob is never
// deleted while a new reference is being added; every node runs one, and
// they share the work the same way.

// collectBatch bounds the blobs one transaction deletes.
const collectBatch = 500

// kickCollector asks the collector for a pass soon; it never blocks.
func (s *Store) kickCollector() {
	select {
	case s.collect <- struct{}{}:
	default:
	}
}

// collector removes unreferenced blobs every CollectInterval and when
// kicked.
func (s *Store) collector() {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.CollectInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		case <-s.collect:
			// Let an expunge burst settle so that one pass takes it all.
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		if err := s.collectOnce(s.ctx); err != nil && s.ctx.Err() == nil {
			s.log.Warn("collecting unreferenced blobs", "err", err)
		}
	}
}

// collectOnce deletes every unreferenced blob, a batch per transaction.
func (s *Store) collectOnce(ctx context.Context) error {
	for range 10000 { // bounded: at most 5M blobs per pass
		var n int64
		err := s.write(ctx, func(w *wtx) error {
			tag, err := w.exec(`DELETE FROM blobs WHERE id IN (SELECT id FROM blobs WHERE refcount <= 0
				LIMIT $1 FOR UPDATE SKIP LOCKED) AND refcount <= 0`, collectBatch)
			n = tag.RowsAffected()
			return err
		})
		if err != nil || n < collectBatch {
			return err
		}
	}
	return nil
}
