package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"pimail/internal/store"
	"pimail/internal/store/changefeed"
)

// Options tune a Store. The zero value is a safe default for every field.
type Options struct {
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
	// MaxConns bounds the connection pool; 0 means 20.
	MaxConns int
	// Feed says how the change feed learns of other nodes' commits:
	// FeedNotify (LISTEN/NOTIFY, the default) or FeedPoll, for
	// PostgreSQL-compatible engines without LISTEN/NOTIFY (feed.go).
	Feed string
	// PollInterval is FeedPoll's interval; 0 means 250 ms.
	PollInterval time.Duration
	// CollectInterval is how often unreferenced blobs are removed; 0
	// means 1 minute, negative disables the background collector.
	CollectInterval time.Duration
	// Admin is for short-lived admin commands: no collector and no
	// change feed from other nodes (they subscribe to nothing).
	Admin bool
}

// The change feed's sources (Options.Feed).
const (
	FeedNotify = "notify"
	FeedPoll   = "poll"
)

func (o *Options) setDefaults() error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 20
	}
	switch o.Feed {
	case "":
		o.Feed = FeedNotify
	case FeedNotify, FeedPoll:
	default:
		return fmt.Errorf("postgres store: change feed %q (want %q or %q): %w", o.Feed, FeedNotify, FeedPoll, store.ErrInvalid)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	if o.CollectInterval == 0 {
		o.CollectInterval = time.Minute
	}
	return nil
}

// Store is the PostgreSQL implementation of store.Store. Several Stores
// (pimail nodes) may share one database.
type Store struct {
	url  string
	opts Options
	log  *slog.Logger
	pool *pgxpool.Pool
	// node names this Store in the change feed's notifications, so that
	// it skips its own (published locally at commit).
	node string
	feed *changefeed.Feed
	// collect kicks the collector (capacity 1).
	collect chan struct{}
	// batchQ feeds the batcher (batch.go).
	batchQ chan *storeReq
	// submitMu orders putting a request into batchQ before Close's last
	// look at it (closeQueue).
	submitMu sync.RWMutex
	// The notifier's pending events and its wake-up (feed.go).
	notifyMu      sync.Mutex
	notifyPending map[store.Event]struct{}
	notifyWake    chan struct{}

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

var _ store.Store = (*Store)(nil)

// IsURL reports whether a database setting names PostgreSQL.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the database at url (postgres://…), creates or
// migrates the schema, and starts the change feed and the collector.
func Open(url string, opts Options) (*Store, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres store: database URL: %w", err)
	}
	cfg.MaxConns = int32(opts.MaxConns)
	cfg.ConnConfig.RuntimeParams["application_name"] = "pimail"
	// Times are Unix integers; nothing depends on the session's zone.
	s := &Store{
		url:     url,
		opts:    opts,
		log:     opts.Logger.With("component", "store"),
		node:    newNodeID(),
		feed:    changefeed.New(),
		collect: make(chan struct{}, 1),
		batchQ:  make(chan *storeReq, maxBatch),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		s.cancel()
		return nil, fmt.Errorf("postgres store: connect: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		s.cancel()
		return nil, err
	}
	if err := s.startFeed(ctx); err != nil {
		s.pool.Close()
		s.cancel()
		return nil, err
	}
	for range batchers {
		s.wg.Add(1)
		go s.batcher()
	}
	if !opts.Admin && opts.CollectInterval > 0 {
		s.wg.Add(1)
		go s.collector()
	}
	return s, nil
}

func newNodeID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Close stops the change feed and the collector and closes the pool;
// every subscription's channel is closed.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		s.closeQueue()
		s.feed.Close()
		s.pool.Close()
	})
	return nil
}

// URL returns the database URL the store was opened with.
func (s *Store) URL() string { return s.url }

// Subscribe returns a channel of change events for an account: this
// node's commits and, through the feed (feed.go), the other nodes'.
func (s *Store) Subscribe(accountID int64) (<-chan store.Event, func()) {
	return s.feed.Subscribe(accountID)
}

// wtx is what a write transaction's function sees: the transaction and
// the change-feed events to publish after the commit.
type wtx struct {
	pgx.Tx
	ctx    context.Context
	events []store.Event
}

func (w *wtx) exec(q string, args ...any) (pgconn.CommandTag, error) {
	return w.Exec(w.ctx, q, args...)
}

func (w *wtx) queryRow(q string, args ...any) pgx.Row { return w.QueryRow(w.ctx, q, args...) }

func (w *wtx) query(q string, args ...any) (pgx.Rows, error) { return w.Query(w.ctx, q, args...) }

// publish records an event to send after the commit.
func (w *wtx) publish(accountID, mailboxID int64) {
	ev := store.Event{AccountID: accountID, MailboxID: mailboxID}
	for _, e := range w.events {
		if e == ev {
			return
		}
	}
	w.events = append(w.events, ev)
}

// maxTxAttempts bounds how often a transaction that lost a deadlock or a
// serialization conflict to another (node's) transaction runs again.
const maxTxAttempts = 10

// write runs fn in a transaction committed durably (synchronous_commit
// as the server has it: on by default, so the commit is flushed, and
// with synchronous replication also on a standby, before Commit
// returns). fn may run more than once: it sets its results afresh each
// time. The events fn recorded go to the other nodes with the commit
// (NOTIFY is part of the transaction) and to this node's subscribers
// after it.
func (s *Store) write(ctx context.Context, fn func(w *wtx) error) error {
	return s.runTx(ctx, false, fn)
}

// writeRelaxed is write whose commit does not wait for the WAL flush
// (synchronous_commit off): for changes whose loss to a crash of the
// database server loses no mail and hands out no MODSEQ again (session
// touches, the delivery log). The next durable commit flushes it.
func (s *Store) writeRelaxed(ctx context.Context, fn func(w *wtx) error) error {
	return s.runTx(ctx, true, fn)
}

func (s *Store) runTx(ctx context.Context, relaxed bool, fn func(w *wtx) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		var events []store.Event
		events, err = s.tryTx(ctx, relaxed, fn)
		if err == nil {
			for _, ev := range events {
				s.feed.Publish(ev)
			}
			s.notify(events)
			return nil
		}
		if !retryable(err) || attempt == maxTxAttempts || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
	}
	return storeErr(err)
}

func (s *Store) tryTx(ctx context.Context, relaxed bool, fn func(w *wtx) error) ([]store.Event, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	if relaxed {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit TO OFF"); err != nil {
			return nil, err
		}
	}
	w := &wtx{Tx: tx, ctx: ctx}
	if err := fn(w); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return w.events, nil
}

// SQLSTATEs the store acts on.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeSerialization       = "40001"
	codeDeadlock            = "40P01"
	codeBadEncoding         = "22021" // invalid UTF-8 or NUL in text
	codeUntranslatable      = "22P05"
)

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func retryable(err error) bool {
	c := sqlState(err)
	return c == codeSerialization || c == codeDeadlock
}

// storeErr wraps a failure of the database in the package's prefix and
// turns text PostgreSQL cannot store into ErrInvalid; errors that already
// wrap a store sentinel pass unchanged.
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range []error{store.ErrNotFound, store.ErrExists, store.ErrInvalid, store.ErrMailboxInUse,
		store.ErrModified, store.ErrQuotaExceeded, store.ErrScriptActive} {
		if errors.Is(err, e) {
			return err
		}
	}
	if c := sqlState(err); c == codeBadEncoding || c == codeUntranslatable {
		return fmt.Errorf("postgres store: %w: %w", store.ErrInvalid, err)
	}
	return fmt.Errorf("postgres store: %w", err)
}

// isUnique reports a unique-constraint violation.
func isUnique(err error) bool { return sqlState(err) == codeUniqueViolation }

// readRow runs a single-row query outside a transaction.
func (s *Store) readRow(ctx context.Context, q string, args ...any) pgx.Row {
	return s.pool.QueryRow(ctx, q, args...)
}

// noRows reports pgx's "no rows" error.
func noRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

func isExists(err error) bool { return errors.Is(err, store.ErrExists) }
