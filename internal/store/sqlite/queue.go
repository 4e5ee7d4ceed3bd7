package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"pimail/internal/store"
)

// Queue times are stored in Unix milliseconds: retry intervals in tests
// are far below a second.
func toMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Enqueue stores the message once (content-addressed, like a delivery) and
// a queue entry that holds one reference on its blob.
func (s *Store) Enqueue(ctx context.Context, e store.QueueEntry, raw []byte) (store.QueueEntry, error) {
	if len(raw) == 0 || len(e.Recipients) == 0 {
		return e, fmt.Errorf("enqueue: empty message or no recipients: %w", store.ErrInvalid)
	}
	nb, err := prepareBlob(raw, nil)
	if err != nil {
		return e, err
	}
	now := time.Now()
	if e.Created.IsZero() {
		e.Created = now
	}
	if e.NextAttempt.IsZero() {
		e.NextAttempt = now
	}
	for attempt := 0; ; attempt++ {
		if err := s.writeBlob(nb.sha, raw); err != nil {
			return e, fmt.Errorf("sqlite store: enqueue: %w", err)
		}
		err = s.write(ctx, func(w *wtx) error {
			blobID, err := s.ensureBlob(w, nb, 1)
			if err != nil {
				return err
			}
			// Queue IDs are never reused (the delivery log and the admin
			// name messages by them): the next is above every ID handed
			// out, kept in meta; a database from before that starts above
			// the queue's and the delivery log's highest.
			var id int64
			if err := w.queryRow(`SELECT coalesce((SELECT value FROM meta WHERE key = 'queue_last_id'),
				max(coalesce((SELECT max(id) FROM queue), 0), coalesce((SELECT max(queue_id) FROM delivery_env), 0))) + 1`).Scan(&id); err != nil {
				return fmt.Errorf("next queue id: %w", err)
			}
			if _, err := w.exec(`INSERT INTO meta (key, value) VALUES ('queue_last_id', ?)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value`, id); err != nil {
				return fmt.Errorf("next queue id: %w", err)
			}
			if _, err := w.exec(`INSERT INTO queue (id, mail_from, account_id, blob_id, created, next_attempt, attempts, delay_notified)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				id, e.MailFrom, e.AccountID, blobID, toMillis(e.Created), toMillis(e.NextAttempt), e.Attempts, e.DelayNotified); err != nil {
				return fmt.Errorf("insert queue entry: %w", err)
			}
			for i, r := range e.Recipients {
				if _, err := w.exec("INSERT INTO queue_rcpts (queue_id, idx, address, state) VALUES (?, ?, ?, ?)",
					id, i, r.Address, store.QueuePending); err != nil {
					return fmt.Errorf("insert queue recipient: %w", err)
				}
			}
			e.ID, e.BlobID, e.Size = id, blobID, nb.size
			return nil
		})
		if errors.Is(err, errBlobMissing) && attempt < maxBlobRetries {
			continue
		}
		if err != nil {
			return e, err
		}
		for i := range e.Recipients {
			e.Recipients[i].State = store.QueuePending
		}
		return e, nil
	}
}

const queueCols = "q.id, q.mail_from, q.account_id, q.blob_id, b.size, q.created, q.next_attempt, q.attempts, q.delay_notified"

type rowQuerier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// loadQueue reads entries (selected by where, with args) and their recipients.
func loadQueue(ctx context.Context, db rowQuerier, where string, args ...any) ([]store.QueueEntry, error) {
	rows, err := db.QueryContext(ctx, "SELECT "+queueCols+" FROM queue q JOIN blobs b ON b.id = q.blob_id "+where, args...)
	if err != nil {
		return nil, fmt.Errorf("list queue: %w", err)
	}
	var out []store.QueueEntry
	idx := map[int64]int{}
	for rows.Next() {
		var e store.QueueEntry
		var created, next int64
		if err := rows.Scan(&e.ID, &e.MailFrom, &e.AccountID, &e.BlobID, &e.Size, &created, &next, &e.Attempts, &e.DelayNotified); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list queue: %w", err)
		}
		e.Created, e.NextAttempt = fromMillis(created), fromMillis(next)
		idx[e.ID] = len(out)
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queue: %w", err)
	}
	for i := range out {
		rs, err := db.QueryContext(ctx, `SELECT address, state, attempts, last_error, last_attempt
			FROM queue_rcpts WHERE queue_id = ? ORDER BY idx`, out[i].ID)
		if err != nil {
			return nil, fmt.Errorf("list queue recipients: %w", err)
		}
		for rs.Next() {
			var r store.QueueRecipient
			var last int64
			if err := rs.Scan(&r.Address, &r.State, &r.Attempts, &r.LastError, &last); err != nil {
				rs.Close()
				return nil, fmt.Errorf("list queue recipients: %w", err)
			}
			r.LastAttempt = fromMillis(last)
			out[i].Recipients = append(out[i].Recipients, r)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, fmt.Errorf("list queue recipients: %w", err)
		}
	}
	return out, nil
}

// QueueEntries lists the whole queue by ID.
func (s *Store) QueueEntries(ctx context.Context) ([]store.QueueEntry, error) {
	out, err := loadQueue(ctx, s.rdb, "ORDER BY q.id")
	if err != nil {
		return nil, fmt.Errorf("sqlite store: %w", err)
	}
	return out, nil
}

// QueueEntry returns one entry.
func (s *Store) QueueEntry(ctx context.Context, id int64) (store.QueueEntry, error) {
	out, err := loadQueue(ctx, s.rdb, "WHERE q.id = ?", id)
	if err != nil {
		return store.QueueEntry{}, fmt.Errorf("sqlite store: %w", err)
	}
	if len(out) == 0 {
		return store.QueueEntry{}, fmt.Errorf("queue entry %d: %w", id, store.ErrNotFound)
	}
	return out[0], nil
}

// txQuerier adapts the write transaction to rowQuerier.
type txQuerier struct{ w *wtx }

func (t txQuerier) QueryContext(_ context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.w.query(q, args...)
}

// ClaimQueue takes due entries and leases them (see store.Store.ClaimQueue).
func (s *Store) ClaimQueue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]store.QueueEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []store.QueueEntry
	err := s.write(ctx, func(w *wtx) error {
		var err error
		out, err = loadQueue(ctx, txQuerier{w}, "WHERE q.next_attempt <= ? ORDER BY q.next_attempt, q.id LIMIT ?", toMillis(now), limit)
		if err != nil {
			return err
		}
		until := toMillis(now.Add(lease))
		for _, e := range out {
			if _, err := w.exec("UPDATE queue SET next_attempt = ? WHERE id = ?", until, e.ID); err != nil {
				return fmt.Errorf("lease queue entry: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateQueueEntry records the outcome of an attempt; an entry without
// pending recipients is removed and its blob reference released.
func (s *Store) UpdateQueueEntry(ctx context.Context, e store.QueueEntry) error {
	pending := false
	for _, r := range e.Recipients {
		if r.State == store.QueuePending {
			pending = true
		}
	}
	err := s.write(ctx, func(w *wtx) error {
		if !pending {
			return deleteQueueEntry(w, e.ID)
		}
		res, err := w.exec("UPDATE queue SET next_attempt = ?, attempts = ?, delay_notified = ? WHERE id = ?",
			toMillis(e.NextAttempt), e.Attempts, e.DelayNotified, e.ID)
		if err != nil {
			return fmt.Errorf("update queue entry: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("queue entry %d: %w", e.ID, store.ErrNotFound)
		}
		for i, r := range e.Recipients {
			if _, err := w.exec(`UPDATE queue_rcpts SET state = ?, attempts = ?, last_error = ?, last_attempt = ?
				WHERE queue_id = ? AND idx = ?`,
				r.State, r.Attempts, r.LastError, toMillis(r.LastAttempt), e.ID, i); err != nil {
				return fmt.Errorf("update queue recipient: %w", err)
			}
		}
		return nil
	})
	if err == nil && !pending {
		s.kickCollector()
	}
	return err
}

// RetryQueueEntry makes an entry due at the given time.
func (s *Store) RetryQueueEntry(ctx context.Context, id int64, at time.Time) error {
	return s.write(ctx, func(w *wtx) error {
		res, err := w.exec("UPDATE queue SET next_attempt = ? WHERE id = ?", toMillis(at), id)
		if err != nil {
			return fmt.Errorf("retry queue entry: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("queue entry %d: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

// DropQueueEntry removes an entry and releases its blob.
func (s *Store) DropQueueEntry(ctx context.Context, id int64) error {
	err := s.write(ctx, func(w *wtx) error { return deleteQueueEntry(w, id) })
	if err == nil {
		s.kickCollector()
	}
	return err
}

func deleteQueueEntry(w *wtx, id int64) error {
	var blobID int64
	err := w.queryRow("DELETE FROM queue WHERE id = ? RETURNING blob_id", id).Scan(&blobID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("queue entry %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete queue entry: %w", err)
	}
	if _, err := w.exec("DELETE FROM queue_rcpts WHERE queue_id = ?", id); err != nil {
		return fmt.Errorf("delete queue recipients: %w", err)
	}
	if _, err := w.exec("UPDATE blobs SET refcount = refcount - 1 WHERE id = ?", blobID); err != nil {
		return fmt.Errorf("release blob reference: %w", err)
	}
	return nil
}
