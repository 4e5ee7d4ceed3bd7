package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"pimail/internal/store"
)

// wtx is what a write request sees: the batch's transaction and a place to
// put the change-feed events it causes, published only after the commit.
type wtx struct {
	tx     *sql.Tx
	ctx    context.Context
	stmts  *batchStmts
	events []store.Event
}

func (w *wtx) exec(q string, args ...any) (sql.Result, error) {
	if st := w.stmts.get(w.ctx, q); st != nil {
		return st.ExecContext(w.ctx, args...)
	}
	return w.tx.ExecContext(w.ctx, q, args...)
}

func (w *wtx) queryRow(q string, args ...any) *sql.Row {
	if st := w.stmts.get(w.ctx, q); st != nil {
		return st.QueryRowContext(w.ctx, args...)
	}
	return w.tx.QueryRowContext(w.ctx, q, args...)
}

func (w *wtx) query(q string, args ...any) (*sql.Rows, error) {
	if st := w.stmts.get(w.ctx, q); st != nil {
		return st.QueryContext(w.ctx, args...)
	}
	return w.tx.QueryContext(w.ctx, q, args...)
}

// maxBatchStmts bounds the statements prepared per batch; statements
// beyond it (built with varying text) run unprepared.
const maxBatchStmts = 128

// batchStmts keeps the statements of one batch's transaction prepared, so
// that the jobs of a group commit, which mostly run the same few
// statements, parse and plan each once. database/sql closes them when the
// transaction ends.
type batchStmts struct {
	tx *sql.Tx
	m  map[string]*sql.Stmt
}

// get returns the prepared statement for q, or nil when the cache is full
// or preparing failed (the caller then runs q directly and sees the error
// there).
func (c *batchStmts) get(ctx context.Context, q string) *sql.Stmt {
	if st, ok := c.m[q]; ok {
		return st
	}
	if len(c.m) >= maxBatchStmts {
		return nil
	}
	st, err := c.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.m[q] = st
	return st
}

// publish records an event to send after the commit.
func (w *wtx) publish(accountID, mailboxID int64) {
	w.events = append(w.events, store.Event{AccountID: accountID, MailboxID: mailboxID})
}

// job is one write request. fn may run more than once (when the whole batch
// is retried after SQLITE_BUSY), so it must set its results afresh each time.
type job struct {
	ctx    context.Context // the caller's; checked before fn runs
	fn     func(w *wtx) error
	events []store.Event
	err    error
	done   chan struct{}
}

// write runs fn in the writer's next batch and waits for the commit.
func (s *Store) write(ctx context.Context, fn func(w *wtx) error) error {
	j := &job{ctx: ctx, fn: fn, done: make(chan struct{})}
	if err := s.submit(ctx, j); err != nil {
		return err
	}
	// Wait even if ctx is cancelled meanwhile: once queued, the request may
	// commit, and the caller must learn whether it did.
	<-j.done
	return j.err
}

func (s *Store) submit(ctx context.Context, j *job) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return errClosed
	}
	select {
	case s.jobs <- j:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writer is the single goroutine that owns the write connection. It takes
// whatever requests are queued (up to MaxBatch) and commits them together.
func (s *Store) writer() {
	defer s.wg.Done()
	batch := make([]*job, 0, s.opts.MaxBatch)
	for {
		j, ok := <-s.jobs
		if !ok {
			return
		}
		batch = append(batch[:0], j)
	drain:
		for len(batch) < s.opts.MaxBatch {
			select {
			case j, ok := <-s.jobs:
				if !ok {
					break drain
				}
				batch = append(batch, j)
			default:
				break drain
			}
		}
		s.runBatch(batch)
	}
}

// runBatch runs the batch in one transaction, one savepoint per job, and
// answers every job. SQLITE_BUSY anywhere restarts the whole batch, with
// back-off, until Options.BusyTimeout.
func (s *Store) runBatch(batch []*job) {
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err = err
			close(j.done)
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout)
	defer cancel()
	err := retryBusy(ctx, func() error { return s.tryBatch(live) })
	if err == nil {
		s.batches.Add(1)
		s.batchJobs.Add(int64(len(live)))
	}
	if len(live) > 1 {
		// Writes from several sessions at once: the indexer steps aside.
		s.busyUntil.Store(time.Now().Add(indexYield).UnixNano())
	}
	for _, j := range live {
		if err != nil {
			j.err = fmt.Errorf("sqlite store: write: %w", markNoSpace(err))
			j.events = nil
		} else {
			j.err = markNoSpace(j.err)
		}
		for _, ev := range j.events {
			s.feed.publish(ev)
		}
		close(j.done)
	}
	if err != nil {
		s.log.Error("write batch failed", "jobs", len(live), "err", err)
	}
}

// tryBatch makes one attempt at committing the batch. A job's own error is
// kept in the job (its savepoint rolled back); only an error that dooms the
// whole transaction is returned.
func (s *Store) tryBatch(batch []*job) (err error) {
	ctx := context.Background()
	tx, err := s.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	stmts := &batchStmts{tx: tx, m: map[string]*sql.Stmt{}}
	for _, j := range batch {
		j.err, j.events = nil, nil
		if _, err := tx.ExecContext(ctx, "SAVEPOINT job"); err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		w := &wtx{tx: tx, ctx: ctx, stmts: stmts}
		jerr := runJob(j, w)
		if jerr != nil && isBusy(jerr) {
			return jerr
		}
		if jerr != nil {
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO job"); err != nil {
				return fmt.Errorf("rollback to savepoint: %w", err)
			}
			j.err = jerr
		} else {
			j.events = w.events
		}
		if _, err := tx.ExecContext(ctx, "RELEASE job"); err != nil {
			return fmt.Errorf("release savepoint: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// runJob calls the job's function, turning a panic into an error so that one
// bad request cannot stop the writer.
func runJob(j *job, w *wtx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in write request: %v", r)
		}
	}()
	return j.fn(w)
}

// isBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED (any extended
// code): the database is locked by another connection and a retry may work.
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}

// isConstraint reports a UNIQUE / PRIMARY KEY violation.
func isConstraint(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
	}
	return false
}

// retryBusy calls fn until it returns something other than a busy error, with
// exponential back-off, until ctx ends (then the last error is returned).
func retryBusy(ctx context.Context, fn func() error) error {
	delay := 2 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || !isBusy(err) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("database busy after %d attempts: %w", attempt+1, err)
		case <-t.C:
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}
