package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// The outbound queue, shared by every node: ClaimQueue takes due entries
// with FOR UPDATE SKIP LOCKED (nodes claiming at once take different
// entries and never wait for each other) and leases them by moving their
// next attempt past the lease, in the same transaction. A node that dies
// mid-delivery leaves its entries due again when the lease ends.

// Queue times are stored in Unix milliseconds.
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

// Enqueue stores the message once (content-addressed, like a delivery)
// and a queue entry that holds one reference on its blob.
func (s *Store) Enqueue(ctx context.Context, e store.QueueEntry, raw []byte) (store.QueueEntry, error) {
	if len(raw) == 0 || len(e.Recipients) == 0 {
		return e, fmt.Errorf("enqueue: empty message or no recipients: %w", store.ErrInvalid)
	}
	nb := prepareBlob(raw, nil)
	now := time.Now()
	if e.Created.IsZero() {
		e.Created = now
	}
	if e.NextAttempt.IsZero() {
		e.NextAttempt = now
	}
	addrs := make([][]byte, len(e.Recipients))
	for i, r := range e.Recipients {
		addrs[i] = []byte(r.Address)
	}
	err := s.write(ctx, func(w *wtx) error {
		blobID, err := ensureBlob(w, nb, 1)
		if err != nil {
			return err
		}
		var id int64
		if err := w.queryRow(`INSERT INTO queue (mail_from, account_id, blob_id, created, next_attempt, attempts, delay_notified)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			[]byte(e.MailFrom), e.AccountID, blobID, toMillis(e.Created), toMillis(e.NextAttempt), e.Attempts, e.DelayNotified).Scan(&id); err != nil {
			return fmt.Errorf("insert queue entry: %w", err)
		}
		if _, err := w.exec(`INSERT INTO queue_rcpts (queue_id, idx, address, state)
			SELECT $1, ord - 1, a, $3 FROM unnest($2::bytea[]) WITH ORDINALITY AS r(a, ord)`,
			id, addrs, int(store.QueuePending)); err != nil {
			return fmt.Errorf("insert queue recipients: %w", err)
		}
		e.ID, e.BlobID, e.Size = id, blobID, int64(len(raw))
		return nil
	})
	if err != nil {
		return e, err
	}
	for i := range e.Recipients {
		e.Recipients[i].State = store.QueuePending
	}
	return e, nil
}

// loadQueue reads entries (selected by where, with args) and their
// recipients.
func loadQueue(ctx context.Context, q querier, where string, args ...any) ([]store.QueueEntry, error) {
	rows, _ := q.Query(ctx, `SELECT q.id, q.mail_from, q.account_id, q.blob_id, b.size, q.created, q.next_attempt,
		q.attempts, q.delay_notified FROM queue q JOIN blobs b ON b.id = q.blob_id `+where, args...)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.QueueEntry, error) {
		var e store.QueueEntry
		var from []byte
		var created, next int64
		err := r.Scan(&e.ID, &from, &e.AccountID, &e.BlobID, &e.Size, &created, &next, &e.Attempts, &e.DelayNotified)
		e.MailFrom, e.Created, e.NextAttempt = string(from), fromMillis(created), fromMillis(next)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list queue: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(out))
	idx := make(map[int64]int, len(out))
	for i, e := range out {
		ids[i] = e.ID
		idx[e.ID] = i
	}
	rows, _ = q.Query(ctx, `SELECT queue_id, address, state, attempts, last_error, last_attempt
		FROM queue_rcpts WHERE queue_id = ANY($1) ORDER BY queue_id, idx`, ids)
	var (
		qid        int64
		addr, lerr []byte
		r          store.QueueRecipient
		last       int64
	)
	_, err = pgx.ForEachRow(rows, []any{&qid, &addr, &r.State, &r.Attempts, &lerr, &last}, func() error {
		rc := r
		rc.Address, rc.LastError, rc.LastAttempt = string(addr), string(lerr), fromMillis(last)
		e := &out[idx[qid]]
		e.Recipients = append(e.Recipients, rc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list queue recipients: %w", err)
	}
	return out, nil
}

// QueueEntries lists the whole queue by ID.
func (s *Store) QueueEntries(ctx context.Context) ([]store.QueueEntry, error) {
	var out []store.QueueEntry
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = loadQueue(ctx, tx, "ORDER BY q.id")
		return err
	})
	return out, err
}

// QueueEntry returns one entry.
func (s *Store) QueueEntry(ctx context.Context, id int64) (store.QueueEntry, error) {
	var out []store.QueueEntry
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = loadQueue(ctx, tx, "WHERE q.id = $1", id)
		return err
	})
	if err != nil {
		return store.QueueEntry{}, err
	}
	if len(out) == 0 {
		return store.QueueEntry{}, fmt.Errorf("queue entry %d: %w", id, store.ErrNotFound)
	}
	return out[0], nil
}

// ClaimQueue takes due entries and leases them (see store.OutboundQueue).
func (s *Store) ClaimQueue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]store.QueueEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []store.QueueEntry
	err := s.write(ctx, func(w *wtx) error {
		rows, _ := w.query(`SELECT id FROM queue WHERE next_attempt <= $1
			ORDER BY next_attempt, id LIMIT $2 FOR UPDATE SKIP LOCKED`, toMillis(now), limit)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("claim queue entries: %w", err)
		}
		if len(ids) == 0 {
			out = nil
			return nil
		}
		// Read before the lease moves next_attempt: the caller sees
		// when the entry was due.
		if out, err = loadQueue(w.ctx, w, "WHERE q.id = ANY($1) ORDER BY q.next_attempt, q.id", ids); err != nil {
			return err
		}
		if _, err := w.exec("UPDATE queue SET next_attempt = $1 WHERE id = ANY($2)", toMillis(now.Add(lease)), ids); err != nil {
			return fmt.Errorf("lease queue entries: %w", err)
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
		tag, err := w.exec("UPDATE queue SET next_attempt = $1, attempts = $2, delay_notified = $3 WHERE id = $4",
			toMillis(e.NextAttempt), e.Attempts, e.DelayNotified, e.ID)
		if err != nil {
			return fmt.Errorf("update queue entry: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("queue entry %d: %w", e.ID, store.ErrNotFound)
		}
		n := len(e.Recipients)
		idx, states, attempts, lasts := make([]int32, n), make([]int32, n), make([]int32, n), make([]int64, n)
		errs := make([][]byte, n)
		for i, r := range e.Recipients {
			idx[i], states[i], attempts[i], errs[i], lasts[i] = int32(i), int32(r.State), int32(r.Attempts), []byte(r.LastError), toMillis(r.LastAttempt)
		}
		if _, err := w.exec(`UPDATE queue_rcpts r SET state = u.state, attempts = u.attempts, last_error = u.last_error,
				last_attempt = u.last_attempt
			FROM unnest($2::integer[], $3::integer[], $4::integer[], $5::bytea[], $6::bigint[])
				AS u(idx, state, attempts, last_error, last_attempt)
			WHERE r.queue_id = $1 AND r.idx = u.idx`, e.ID, idx, states, attempts, errs, lasts); err != nil {
			return fmt.Errorf("update queue recipients: %w", err)
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
		tag, err := w.exec("UPDATE queue SET next_attempt = $1 WHERE id = $2", toMillis(at), id)
		if err != nil {
			return fmt.Errorf("retry queue entry: %w", err)
		}
		if tag.RowsAffected() == 0 {
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
	err := w.queryRow("DELETE FROM queue WHERE id = $1 RETURNING blob_id", id).Scan(&blobID)
	if noRows(err) {
		return fmt.Errorf("queue entry %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete queue entry: %w", err)
	}
	if _, err := w.exec("UPDATE blobs SET refcount = refcount - 1 WHERE id = $1", blobID); err != nil {
		return fmt.Errorf("release blob reference: %w", err)
	}
	return nil
}
