package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"pimail/internal/store"
)

// \Recent claims (store.Recent) are decided in memory, under one lock,
// and written to mailboxes.first_recent_uid behind them, in relaxed
// commits nobody waits for: a session that sees a new message (every
// APPEND into the mailbox it has selected) claims it without a write
// request of its own, which cost an APPEND a third of its rate. The
// claims of one process are exact; pimail serves an SQLite data
// directory from one process. A crash can lose the last claims, which
// makes those messages recent once more; Close writes them.

// recentFloors is the first unclaimed UID of each mailbox this process
// has claimed in, and those not yet written.
type recentFloors struct {
	mu       sync.Mutex
	floor    map[int64]uint32
	dirty    map[int64]uint32
	flushing bool
}

// ClaimRecent claims the unclaimed messages up to upTo (store.Recent).
func (s *Store) ClaimRecent(ctx context.Context, mailboxID int64, upTo uint32) (uint32, error) {
	r := &s.recent
	r.mu.Lock()
	first, known := r.floor[mailboxID]
	r.mu.Unlock()
	if !known {
		err := s.readRow(ctx, "SELECT first_recent_uid FROM mailboxes WHERE id = ?", mailboxID).Scan(&first)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("mailbox %d: %w", mailboxID, store.ErrNotFound)
		}
		if err != nil {
			return 0, fmt.Errorf("sqlite store: read first recent uid: %w", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.floor == nil {
		r.floor, r.dirty = map[int64]uint32{}, map[int64]uint32{}
	}
	first = max(first, r.floor[mailboxID]) // another claim may have come in between
	if first > upTo {
		r.floor[mailboxID] = first
		return first, nil
	}
	r.floor[mailboxID] = upTo + 1
	r.dirty[mailboxID] = upTo + 1
	if !r.flushing {
		r.flushing = true
		go func() {
			// Claims that come meanwhile (a client appending message
			// after message) share the write.
			select {
			case <-time.After(recentFlushDelay):
			case <-s.ctx.Done(): // Close writes them
			}
			s.flushRecent()
		}()
	}
	return first, nil
}

// recentFlushDelay is how long a claim waits before it is written, so
// that the claims of a burst of new mail share one write. A crash within
// it makes those messages recent once more.
const recentFlushDelay = 100 * time.Millisecond

// flushRecent writes the claims not yet written, until none are left.
// Close calls it too, before the writer stops.
func (s *Store) flushRecent() {
	r := &s.recent
	for {
		r.mu.Lock()
		batch := r.dirty
		if len(batch) == 0 {
			r.flushing = false
			r.mu.Unlock()
			return
		}
		r.dirty = map[int64]uint32{}
		r.mu.Unlock()
		err := s.writeRelaxed(context.Background(), func(w *wtx) error {
			for id, f := range batch {
				// A floor never passes UIDNEXT: this keeps a late write
				// off a new mailbox that got a deleted one's ID.
				if _, err := w.exec("UPDATE mailboxes SET first_recent_uid = max(first_recent_uid, ?1) WHERE id = ?2 AND uidnext >= ?1", f, id); err != nil {
					return fmt.Errorf("write recent claim: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			s.log.Debug("sqlite store: recent claims not written", "err", err)
			r.mu.Lock()
			r.flushing = false
			r.mu.Unlock()
			return
		}
	}
}

// recentFloor is a mailbox's first unclaimed UID: the database's, or
// this process's claim not yet written.
func (s *Store) recentFloor(mailboxID int64, stored uint32) uint32 {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(stored, r.floor[mailboxID])
}

// forgetRecent drops the claims of a deleted mailbox (0: all), whose
// IDs SQLite may hand out again.
func (s *Store) forgetRecent(mailboxID int64) {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	if mailboxID == 0 {
		clear(r.floor)
		clear(r.dirty)
		return
	}
	delete(r.floor, mailboxID)
	delete(r.dirty, mailboxID)
}

var _ store.Recent = (*Store)(nil)
