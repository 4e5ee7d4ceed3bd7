package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	// shared holds the statements prepared for every batch; learned are
	// those this batch prepared for itself, to add to shared after it.
	shared  *stmtCache
	learned []string
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
	if st := c.shared.lookup(q); st != nil {
		// Prepared on this same connection by an earlier batch
		// (Tx.StmtContext reuses it rather than preparing again).
		st = c.tx.StmtContext(ctx, st)
		c.m[q] = st
		return st
	}
	st, err := c.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.m[q] = st
	c.learned = append(c.learned, q)
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
	// relaxed: the request may be committed without fsync (see
	// writeRelaxed). durablePast: fn has effects outside the database
	// (removing files) that rely on every earlier commit being on disk.
	relaxed, durablePast bool
}

// write runs fn in the writer's next batch and waits for the durable
// commit (fsync).
func (s *Store) write(ctx context.Context, fn func(w *wtx) error) error {
	return s.submitWait(ctx, &job{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// writeRelaxed runs fn like write, but its commit may skip the fsync: for
// changes whose loss on power failure loses no mail (expunge, flags). A
// crash of the machine can roll such a commit back (expunged messages
// reappear, flags revert); the next durable commit, the writer's own sync
// at most relaxedSyncDelay later, or at most maxRelaxedJobs relaxed
// requests later, makes it durable. See "Durability classes" in doc.go.
func (s *Store) writeRelaxed(ctx context.Context, fn func(w *wtx) error) error {
	return s.submitWait(ctx, &job{ctx: ctx, fn: fn, done: make(chan struct{}), relaxed: true})
}

// writeAfterDurable runs fn like write, after making every earlier relaxed
// commit durable: for requests that act on the file system on the strength
// of earlier commits (the collector deletes a file because an expunge
// brought its reference count to zero).
func (s *Store) writeAfterDurable(ctx context.Context, fn func(w *wtx) error) error {
	return s.submitWait(ctx, &job{ctx: ctx, fn: fn, done: make(chan struct{}), durablePast: true})
}

func (s *Store) submitWait(ctx context.Context, j *job) error {
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
	defer s.closeRelaxed()
	batch := make([]*job, 0, s.opts.MaxBatch)
	syncTimer := time.NewTimer(time.Hour)
	syncTimer.Stop()
	armed := false
	groupTimer := time.NewTimer(time.Hour)
	groupTimer.Stop()
	last := 0 // requests in the previous batch
	for {
		var j *job
		ok := true
		if s.rx.pending.Load() > 0 {
			if !armed {
				syncTimer.Reset(relaxedSyncDelay)
				armed = true
			}
			select {
			case j, ok = <-s.jobs:
			case <-syncTimer.C:
				armed = false
				s.syncRelaxed()
				continue
			}
		} else {
			if armed {
				syncTimer.Stop() // Go ≥ 1.23: no stale tick is received after Stop
				armed = false
			}
			j, ok = <-s.jobs
		}
		if !ok {
			return
		}
		batch = append(batch[:0], j)
		// After a commit of one request the next commits at once; after
		// a commit of several (concurrent load) the batch waits up to
		// GroupWait for company. On 50 connections
		// delivering 8 KB messages, commits carried ~2 deliveries
		// without the wait; 1 ms of it gave +6 % msgs/s and 20 % fewer
		// bytes written a message.
		var wait <-chan time.Time
		if last > 1 && s.opts.GroupWait > 0 {
			groupTimer.Reset(s.opts.GroupWait)
			wait = groupTimer.C
		}
		batch = s.takeQueued(batch, wait)
		groupTimer.Stop()
		last = len(batch)
		s.runBatch(batch)
	}
}

// takeQueued adds queued requests to batch, up to MaxBatch: those queued now
// when wait is nil, else all that come until wait fires.
func (s *Store) takeQueued(batch []*job, wait <-chan time.Time) []*job {
	for len(batch) < s.opts.MaxBatch {
		var j *job
		ok := true
		if wait == nil {
			select {
			case j, ok = <-s.jobs:
			default:
				return batch
			}
		} else {
			select {
			case j, ok = <-s.jobs:
			case <-wait:
				return batch
			}
		}
		if !ok {
			return batch
		}
		batch = append(batch, j)
	}
	return batch
}

// runBatch runs the batch in one transaction and answers every job. The
// jobs run without savepoints: inside one, SQLite copies every page a job
// changes into a sub-journal first (a temporary file), which cost a third
// of the writer's time on a load of APPENDs and most of the bytes a
// delivery to many recipients wrote. A job that fails takes the
// transaction down with it: it gets its error, and the others run again,
// this time each in a savepoint of its own, so that a second failure
// costs no third run. SQLITE_BUSY anywhere restarts the whole batch, with
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
	var err error
	relaxed := s.batchRelaxed(live)
	if !relaxed && s.rx.pending.Load() > 0 && slices.ContainsFunc(live, func(j *job) bool { return j.durablePast }) {
		// Make the relaxed commits durable before a request acts on them.
		err = s.syncRelaxedCtx(ctx)
	}
	for savepoints := false; err == nil && len(live) > 0; savepoints = true {
		err = retryBusy(ctx, func() error { return s.tryBatch(live, relaxed, savepoints) })
		var failed *jobFailed
		if !errors.As(err, &failed) {
			break
		}
		// The request's own error; nothing was committed.
		j := live[failed.index]
		j.err, j.events, err = markNoSpace(failed.err), nil, nil
		close(j.done)
		live = slices.Delete(live, failed.index, failed.index+1)
	}
	if err == nil && len(live) > 0 {
		s.batches.Add(1)
		s.batchJobs.Add(int64(len(live)))
		s.afterCommit(relaxed, len(live))
		s.kickCheckpointer()
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
			s.feed.Publish(ev)
		}
		close(j.done)
	}
	if relaxed {
		// Back to FULL once the callers have their answers: the
		// connection rests in the durable setting (and every batch sets
		// the one it needs before it begins anyway).
		if err := s.setSynchronous(ctx, true); err != nil {
			s.log.Warn("restoring synchronous=FULL", "err", err)
		}
	}
	if err != nil {
		s.log.Error("write batch failed", "jobs", len(live), "err", err)
	}
}

// tryBatch makes one attempt at committing the batch. Without savepoints
// the first job to fail ends the attempt with a *jobFailed (the deferred
// Rollback undoes the others). With savepoints (and more than one job) a
// job's own error is kept in the job, its savepoint rolled back; only an
// error that dooms the whole transaction is returned.
func (s *Store) tryBatch(batch []*job, relaxed, savepoints bool) (err error) {
	ctx := context.Background()
	if err := s.setSynchronous(ctx, !relaxed); err != nil {
		return err
	}
	tx, err := s.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if err := s.markRelaxed(ctx, tx, batch, relaxed); err != nil {
		return err
	}
	stmts := &batchStmts{tx: tx, m: map[string]*sql.Stmt{}, shared: &s.wstmts}
	savepoints = savepoints && len(batch) > 1
	for i, j := range batch {
		j.err, j.events = nil, nil
		if savepoints {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT job"); err != nil {
				return fmt.Errorf("savepoint: %w", err)
			}
		}
		w := &wtx{tx: tx, ctx: ctx, stmts: stmts}
		jerr := runJob(j, w)
		if jerr != nil && isBusy(jerr) {
			return jerr
		}
		if !savepoints {
			if jerr != nil {
				return &jobFailed{index: i, err: jerr}
			}
			j.events = w.events
			continue
		}
		if jerr != nil {
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO job"); err != nil {
				// SQLite may have rolled the whole transaction
				// back itself (SQLITE_FULL, SQLITE_IOERR): the
				// batch fails with the job's error.
				return fmt.Errorf("%w (rollback to savepoint: %v)", jerr, err)
			}
			j.err = jerr
		} else {
			j.events = w.events
		}
		if _, err := tx.ExecContext(ctx, "RELEASE job"); err != nil {
			return fmt.Errorf("release savepoint: %w", err)
		}
	}
	return s.commitBatch(ctx, tx, stmts)
}

// jobFailed: the request batch[index] failed with err, and the transaction
// was rolled back with it; nothing was committed.
type jobFailed struct {
	index int
	err   error
}

func (e *jobFailed) Error() string { return e.err.Error() }

// commitBatch commits a batch's transaction and keeps the statements it
// prepared for later batches.
func (s *Store) commitBatch(ctx context.Context, tx *sql.Tx, stmts *batchStmts) error {
	if testHookCommit != nil {
		var sync int
		if err := tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			return fmt.Errorf("read synchronous: %w", err)
		}
		testHookCommit(sync)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.learnWriterStmts(stmts.learned)
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

// Relaxed commits (see writeRelaxed and "Durability classes" in doc.go).
var (
	// relaxedSyncDelay is how long relaxed commits may stay without
	// fsync when no other commit comes: then the writer syncs them.
	relaxedSyncDelay = time.Second
	// maxRelaxedJobs bounds the relaxed requests committed since the last
	// fsync; the batch that would exceed it is committed durably. It also
	// bounds how many modification sequences of a mailbox a power failure
	// can take back, which relaxedModSeqGap must exceed.
	maxRelaxedJobs = 1024
)

// relaxedModSeqGap is what Open adds to every mailbox's HIGHESTMODSEQ after
// a power failure may have taken back relaxed commits (recoverRelaxed).
const relaxedModSeqGap = 1 << 20

// relaxedState is the writer's bookkeeping of relaxed commits. Only the
// writer goroutine changes it; pending is atomic so that tests can read it.
type relaxedState struct {
	pending atomic.Int64 // relaxed requests committed since the WAL was last fsynced
	// marker is the meta key that records, durably, that this store may
	// have relaxed commits on disk (relaxedMarker); "" until written.
	marker    string
	newMarker string // the marker written by the transaction being tried
	sync      int8   // the write connection's synchronous setting: 0 unknown, 1 NORMAL, 2 FULL
}

// markerSeq tells apart the stores one process opens on one directory.
var markerSeq atomic.Int64

// bootID identifies the running kernel (Linux); "" elsewhere, and then no
// commit is relaxed, because recoverRelaxed could not tell a power failure
// from another process that is still running.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// relaxedMarker builds this store's marker key: "relaxed:<boot id>:<pid>:<n>".
func relaxedMarker() string {
	return fmt.Sprintf("relaxed:%s:%d:%d", bootID(), os.Getpid(), markerSeq.Add(1))
}

// batchRelaxed decides whether a batch may be committed without fsync:
// only when every request in it is relaxed, the marker is on disk and the
// bound on unsynced requests is kept.
func (s *Store) batchRelaxed(batch []*job) bool {
	if s.rx.marker == "" || int(s.rx.pending.Load())+len(batch) > maxRelaxedJobs {
		return false
	}
	for _, j := range batch {
		if !j.relaxed {
			return false
		}
	}
	return true
}

// setSynchronous switches the write connection between synchronous=FULL
// (full) and NORMAL, outside a transaction (SQLite ignores the pragma
// inside one). A failure leaves the setting unknown, so that the next batch
// sets it again before it begins.
func (s *Store) setSynchronous(ctx context.Context, full bool) error {
	want, q := int8(2), "PRAGMA synchronous=FULL"
	if !full {
		want, q = 1, "PRAGMA synchronous=NORMAL"
	}
	if s.rx.sync == want {
		return nil
	}
	s.rx.sync = 0
	if _, err := s.wdb.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("set %s: %w", q, err)
	}
	s.rx.sync = want
	return nil
}

// markRelaxed runs at the start of every batch's transaction. A durable
// batch that follows relaxed commits writes the marker row, so that it
// certainly appends to the WAL and its fsync covers the relaxed commits
// before it (a transaction that changes nothing is not synced). The first
// batch with relaxed requests is committed durably and writes the marker.
func (s *Store) markRelaxed(ctx context.Context, tx *sql.Tx, batch []*job, relaxed bool) error {
	s.rx.newMarker = ""
	switch {
	case relaxed:
		return nil
	case s.rx.marker != "" && s.rx.pending.Load() > 0:
		if _, err := tx.ExecContext(ctx, "UPDATE meta SET value = ? WHERE key = ?", time.Now().Unix(), s.rx.marker); err != nil {
			return fmt.Errorf("update relaxed-commit marker: %w", err)
		}
	case s.rx.marker == "" && bootID() != "" && slices.ContainsFunc(batch, func(j *job) bool { return j.relaxed }):
		m := relaxedMarker()
		if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", m, time.Now().Unix()); err != nil {
			return fmt.Errorf("write relaxed-commit marker: %w", err)
		}
		s.rx.newMarker = m
	}
	return nil
}

// afterCommit updates the bookkeeping after a batch of n requests committed.
func (s *Store) afterCommit(relaxed bool, n int) {
	if relaxed {
		s.rx.pending.Add(int64(n))
		return
	}
	s.rx.pending.Store(0) // the fsync of the WAL covered every earlier frame
	if s.rx.newMarker != "" {
		s.rx.marker, s.rx.newMarker = s.rx.newMarker, ""
	}
}

// syncRelaxed makes the relaxed commits durable with a durable commit of
// the marker row; errors are logged (the next durable commit syncs them).
func (s *Store) syncRelaxed() {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout)
	defer cancel()
	if err := s.syncRelaxedCtx(ctx); err != nil {
		s.log.Warn("syncing relaxed commits", "err", err)
	}
}

func (s *Store) syncRelaxedCtx(ctx context.Context) error {
	if s.rx.pending.Load() == 0 {
		return nil
	}
	err := retryBusy(ctx, func() error { return s.tryBatch(nil, false, false) })
	if err != nil {
		return fmt.Errorf("sync relaxed commits: %w", err)
	}
	s.afterCommit(false, 0)
	return nil
}

// closeRelaxed runs when the writer stops: it deletes the marker in a
// durable commit, which also syncs the relaxed commits before it.
func (s *Store) closeRelaxed() {
	if s.rx.marker == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout)
	defer cancel()
	err := retryBusy(ctx, func() error {
		if err := s.setSynchronous(ctx, true); err != nil {
			return err
		}
		_, err := s.wdb.ExecContext(ctx, "DELETE FROM meta WHERE key = ?", s.rx.marker)
		return err
	})
	if err != nil {
		s.log.Warn("removing the relaxed-commit marker", "err", err)
		return
	}
	s.rx.marker = ""
	s.rx.pending.Store(0)
}

// recoverRelaxed runs at Open, before the writer starts. A marker of
// another boot means that a store committed without fsync and the machine
// went down before it closed: a power failure may have taken back relaxed
// commits, and with them modification sequences that clients have seen
// (RFC 7162 §3.1: a MODSEQ must not be handed out twice for different
// states). Every mailbox's HIGHESTMODSEQ then jumps by relaxedModSeqGap
// (more than the relaxed requests that can be unsynced) and every message
// takes the new value, so that CONDSTORE and QRESYNC clients fetch the
// flags again and see messages whose expunge was lost. Markers of this boot
// belong to running processes (or to ones that crashed without a power
// failure, which loses nothing) and stay.
func (s *Store) recoverRelaxed() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout)
	defer cancel()
	boot := bootID()
	return retryBusy(ctx, func() error {
		tx, err := s.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE
		if err != nil {
			return err
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, "SELECT key FROM meta WHERE key LIKE 'relaxed:%'")
		if err != nil {
			return fmt.Errorf("list relaxed-commit markers: %w", err)
		}
		var stale []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return fmt.Errorf("list relaxed-commit markers: %w", err)
			}
			if b, _, _ := strings.Cut(strings.TrimPrefix(k, "relaxed:"), ":"); b != boot || boot == "" {
				stale = append(stale, k)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("list relaxed-commit markers: %w", err)
		}
		if len(stale) == 0 {
			return nil
		}
		for _, q := range []string{
			fmt.Sprintf("UPDATE mailboxes SET highestmodseq = highestmodseq + %d", relaxedModSeqGap),
			"UPDATE mail SET modseq = (SELECT highestmodseq FROM mailboxes WHERE mailboxes.id = mail.mailbox_id)",
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("raise modification sequences after a crash: %w", err)
			}
		}
		for _, k := range stale {
			if _, err := tx.ExecContext(ctx, "DELETE FROM meta WHERE key = ?", k); err != nil {
				return fmt.Errorf("remove relaxed-commit marker: %w", err)
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		s.log.Warn("the machine went down while relaxed commits (expunges, flag changes) were not synced: they may have been taken back; modification sequences raised so that clients resynchronise",
			"markers", len(stale))
		return nil
	})
}

// testHookCommit, set by tests, receives the synchronous setting (1 NORMAL,
// 2 FULL) of every batch transaction just before it commits.
var testHookCommit func(synchronous int)

// Checkpoints. SQLite's automatic checkpoint runs inside the commit that
// finds 1000 pages in the WAL, so that one request in a few pays for
// copying every page to the database file and two fsyncs (10-20 ms here,
// more than an expunge or a delivery costs). The checkpointer goroutine
// does it instead, on a connection of its own, as a PASSIVE checkpoint that
// never blocks the writer or the readers: once checkpointCommits commits
// are in the WAL, after the writer has been idle for checkpointQuiet, or at
// the latest checkpointMax after the first of them while writes go on; with
// fewer, after checkpointIdle without a commit. The WAL is synced before it
// is copied (synchronous=FULL on that connection), so relaxed commits only
// become more durable by it.
//
// A checkpoint copies every page changed since the last one once, however
// often it changed: the last leaves of the indexes, the mailbox and
// account rows, the database header. When mail trickles in, one message
// at a time, a checkpoint after every message copied those again for each;
// after checkpointCommits commits they are copied once for all of them (one
// message a second: 218 KB written a message instead of 308).
//
// A checkpoint that runs beside the writer rarely finds nothing new in the
// WAL, and SQLite starts the WAL file over only after a complete one: under
// a stream of writes (a bulk APPEND) the WAL would grow without end. So the
// write connection still checkpoints by itself, at walBackstop pages: that
// checkpoint copies only what the checkpointer has not, and the next write
// starts the WAL over.
var walBackstop = 4000 // pages: 16 MB at the default page size; a variable for tests

var (
	checkpointCommits int64 = 64 // about SQLite's 1000 pages of one-message commits
	checkpointQuiet         = 500 * time.Millisecond
	checkpointMax           = 5 * time.Second
	checkpointIdle          = 10 * time.Minute
)

// kickCheckpointer tells the checkpointer that a commit happened. It never
// blocks.
func (s *Store) kickCheckpointer() {
	s.lastCommit.Store(time.Now().UnixNano())
	s.commits.Add(1)
	select {
	case s.ckpt <- struct{}{}:
	default:
	}
}

// checkpointer runs PASSIVE checkpoints (see above) until Close.
func (s *Store) checkpointer() {
	defer s.wg.Done()
	var copied int64 // s.commits at the start of the last checkpoint
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.ckpt:
		}
		first := time.Now()
		for {
			quiet := time.Since(time.Unix(0, s.lastCommit.Load()))
			// Below the threshold, each commit may reach it: wake on
			// kicks. Above it, only time matters, so that a stream of
			// commits does not wake the checkpointer once each.
			wait, kick := checkpointIdle-quiet, s.ckpt
			if s.commits.Load()-copied >= checkpointCommits {
				wait, kick = min(checkpointQuiet-quiet, checkpointMax-time.Since(first)), nil
			}
			if wait <= 0 {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-kick:
				t.Stop()
			case <-t.C:
			}
		}
		copied = s.commits.Load()
		if _, err := s.cdb.ExecContext(s.ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil && s.ctx.Err() == nil {
			s.log.Warn("checkpoint", "err", err)
		} else if err == nil {
			s.checkpoints.Add(1)
		}
	}
}
