package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"pimail/internal/store"
	"pimail/internal/store/changefeed"
)

// Options tune a Store. The zero value is a safe default for every field.
type Options struct {
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
	// ReadConns is the size of the read connection pool; 0 means
	// max(4, 2*GOMAXPROCS).
	ReadConns int
	// BusyTimeout bounds how long a write waits for the database lock held
	// by another process before it fails; 0 means 30 s.
	BusyTimeout time.Duration
	// MaxBatch is the largest number of write requests committed in one
	// transaction; 0 means 256.
	MaxBatch int
	// GroupWait is how long the writer waits for more requests before a
	// commit when the previous commit carried more than one (so requests
	// are arriving concurrently): a longer commit shares its fsync and
	// its rewritten index pages among more deliveries, the idea of
	// PostgreSQL's commit_delay. 0 means 1 ms; negative never waits.
	GroupWait time.Duration
	// CollectInterval is how often the background collector removes blobs
	// that no message references any more; 0 means 1 minute, negative
	// disables the background collector (Open still collects once).
	CollectInterval time.Duration
	// OrphanGrace is the minimum age of a message file without a database
	// row (or of a temporary file) before it is deleted as an orphan left by
	// a crash; 0 means 15 minutes. It protects deliveries of other processes
	// that have written their file but not yet committed.
	OrphanGrace time.Duration
	// NoCollect skips the blob collection at Open and the background
	// collector: for short-lived processes such as admin commands, which
	// leave that work to the server.
	NoCollect bool
	// InlineMax is the largest message kept in the database rather than
	// in a file of its own (blobs.go); 0 means 128 KiB, negative keeps
	// every message in a file.
	InlineMax int
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReadConns <= 0 {
		o.ReadConns = max(4, 2*runtime.GOMAXPROCS(0))
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 30 * time.Second
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.GroupWait == 0 {
		o.GroupWait = time.Millisecond
	}
	if o.CollectInterval == 0 {
		o.CollectInterval = time.Minute
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = 15 * time.Minute
	}
	if o.InlineMax == 0 {
		o.InlineMax = defaultInlineMax
	}
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	dir     string
	blobDir string
	opts    Options
	log     *slog.Logger

	wdb *sql.DB // exactly one connection, used only by the writer goroutine
	rdb *sql.DB // read-only pool
	cdb *sql.DB // one connection for the checkpointer (writer.go)
	bdb *sql.DB // read-only pool for message bytes kept in the database (blobs.go)

	jobs    chan *job
	collect chan struct{} // kicks the collector; capacity 1
	feed    *changefeed.Feed
	fts     *ftsIndex // full-text index (fts.go); nil without the indexer

	// Group-commit counters: committed batches and the requests in them.
	batches   atomic.Int64
	batchJobs atomic.Int64
	// busyUntil (Unix ns): the writer saw concurrent writes; the indexer
	// defers its work until then (fts_indexer.go).
	busyUntil atomic.Int64
	// rx is the writer's bookkeeping of commits without fsync (writer.go).
	rx relaxedState
	// ckpt kicks the checkpointer (capacity 1); lastCommit is the time
	// (Unix ns) of the last commit and commits their number (writer.go).
	ckpt        chan struct{}
	lastCommit  atomic.Int64
	commits     atomic.Int64
	checkpoints atomic.Int64 // checkpoints done, for tests
	// Statements of hot constant queries, prepared once (stmtcache.go).
	rstmts, bstmts, wstmts stmtCache
	// recent holds the \Recent claims of this process (recent.go).
	recent recentFloors

	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeMu   sync.RWMutex // held for reading while a request is being queued
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// errClosed is returned by every method after Close.
var errClosed = errors.New("sqlite store: closed")

// Open opens (creating if needed) the store in dir: dir/pimail.db and
// dir/blobs/. It migrates the schema, collects blobs left unreferenced or
// orphaned by a crash, and starts the writer and the collector.
func Open(dir string, opts Options) (*Store, error) {
	opts.setDefaults()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: data directory %q: %w", dir, err)
	}
	if strings.ContainsAny(abs, "?#") {
		return nil, fmt.Errorf("sqlite store: data directory %q: must not contain '?' or '#': %w", abs, store.ErrInvalid)
	}
	s := &Store{
		dir:     abs,
		blobDir: filepath.Join(abs, "blobs"),
		opts:    opts,
		log:     opts.Logger.With("component", "store"),
		jobs:    make(chan *job, opts.MaxBatch),
		collect: make(chan struct{}, 1),
		ckpt:    make(chan struct{}, 1),
		feed:    changefeed.New(),
	}
	for _, d := range []string{abs, s.blobDir, filepath.Join(s.blobDir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("sqlite store: create %s: %w", d, err)
		}
	}
	if err := s.openDBs(); err != nil {
		return nil, err
	}
	if err := s.migrate(); err != nil {
		s.closeDBs()
		return nil, err
	}
	if err := s.recoverRelaxed(); err != nil { // writer.go
		s.closeDBs()
		return nil, fmt.Errorf("sqlite store: recover from a crash: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.writer()
	go s.checkpointer()

	if opts.NoCollect {
		return s, nil
	}
	// Recover from a crash before serving: unreferenced blobs and orphan files.
	if err := s.collectOnce(); err != nil {
		s.log.Warn("collecting unreferenced blobs at open", "err", err)
	}
	if err := s.collectOrphans(); err != nil {
		s.log.Warn("collecting orphan blob files at open", "err", err)
	}
	if opts.CollectInterval > 0 {
		s.wg.Add(1)
		go s.collector()
	}
	s.startIndexer() // full-text index in DIR/index.db, see fts.go
	return s, nil
}

// dsn builds a connection string for the database file with pragmas that
// every connection runs when it is opened.
func (s *Store) dsn(readOnly bool) string {
	busy := s.opts.BusyTimeout.Milliseconds()
	if busy > 5000 {
		busy = 5000 // the writer retries on top of this, see runBatch
	}
	p := filepath.Join(s.dir, "pimail.db") +
		fmt.Sprintf("?_pragma=busy_timeout(%d)", busy) +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(FULL)"
	if readOnly {
		p += "&_pragma=query_only(1)"
	} else {
		// The checkpointer checkpoints; commits only as a backstop
		// (walBackstop, writer.go).
		p += fmt.Sprintf("&_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(%d)&_txlock=immediate", walBackstop)
	}
	return p
}

func (s *Store) openDBs() error {
	var err error
	// The write connection comes first: it switches the file to WAL.
	s.wdb, err = sql.Open("sqlite", s.dsn(false))
	if err != nil {
		return fmt.Errorf("sqlite store: open database: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout)
	defer cancel()
	var mode string
	if err := retryBusy(ctx, func() error {
		return s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	}); err != nil {
		s.wdb.Close()
		return fmt.Errorf("sqlite store: open database: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		s.wdb.Close()
		return fmt.Errorf("sqlite store: journal mode is %q, want wal", mode)
	}
	s.rdb, err = sql.Open("sqlite", s.dsn(true))
	if err != nil {
		s.wdb.Close()
		return fmt.Errorf("sqlite store: open read pool: %w", err)
	}
	s.rdb.SetMaxOpenConns(s.opts.ReadConns)
	s.rdb.SetMaxIdleConns(s.opts.ReadConns)
	s.cdb, err = sql.Open("sqlite", s.dsn(false))
	if err != nil {
		s.rdb.Close()
		s.wdb.Close()
		return fmt.Errorf("sqlite store: open checkpoint connection: %w", err)
	}
	s.cdb.SetMaxOpenConns(1)
	s.cdb.SetMaxIdleConns(1)
	s.cdb.SetConnMaxLifetime(0)
	s.cdb.SetConnMaxIdleTime(0)
	// Messages kept in the database are read on a pool of their own, one
	// statement at a time, so that a reader holding a connection of rdb
	// (a search going through its rows) never waits for another one.
	// Their pages are read once and need little cache.
	s.bdb, err = sql.Open("sqlite", s.dsn(true)+"&_pragma=cache_size(-256)")
	if err != nil {
		s.cdb.Close()
		s.rdb.Close()
		s.wdb.Close()
		return fmt.Errorf("sqlite store: open blob read pool: %w", err)
	}
	s.bdb.SetMaxOpenConns(blobReadConns)
	s.bdb.SetMaxIdleConns(blobReadConns)
	return nil
}

func (s *Store) closeDBs() error {
	var errs []error
	if s.bdb != nil {
		errs = append(errs, s.bdb.Close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.cdb != nil {
		errs = append(errs, s.cdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	return errors.Join(errs...)
}

// Close stops the writer and the collector after the queued writes are done,
// closes every change-feed subscription and the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.flushRecent() // the last claims, before the writer stops
		s.closeMu.Lock()
		s.closed = true
		close(s.jobs) // no sender can be inside submit now
		s.closeMu.Unlock()
		s.cancel()
		s.wg.Wait()
		s.feed.Close()
		s.rstmts.close()
		s.bstmts.close()
		s.wstmts.close()
		if err := s.closeDBs(); err != nil {
			s.closeErr = fmt.Errorf("sqlite store: close: %w", err)
		}
	})
	return s.closeErr
}

// Subscribe returns a channel of change events for an account (published
// after each commit of this process) and a function that stops it.
func (s *Store) Subscribe(accountID int64) (<-chan store.Event, func()) {
	return s.feed.Subscribe(accountID)
}

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }
