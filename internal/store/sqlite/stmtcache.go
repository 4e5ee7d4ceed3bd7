package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// maxCachedStmts bounds a stmtCache. Only constant query texts go into one,
// so the bound is a guard against a caller building queries by hand.
const maxCachedStmts = 256

// stmtCache keeps the constant queries of hot paths prepared for the life
// of the store. Without it database/sql prepares a query text on every
// call, and for the small queries of a delivery (a quota, a blob lookup,
// a mail row) SQLite's parsing and planning cost as much as running them:
// a profile of SMTP ingest had 8 % of the server's CPU in preparing the
// quota query alone. database/sql prepares a cached *sql.Stmt again on each
// pooled connection the first time it runs there.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// errStmtCacheFull: the statement was not prepared; run the query directly.
var errStmtCacheFull = errors.New("statement cache full")

// get returns q prepared on db, preparing it on first use. It prepares with ctx, which must be the store's:
// the driver keeps the context a statement was prepared with, so a
// request's context would leave its cancellation in the statement for every
// later caller. get must not be called while the caller holds a
// transaction of db: preparing needs a free connection.
func (c *stmtCache) get(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	if len(c.m) >= maxCachedStmts {
		return nil, errStmtCacheFull
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = make(map[string]*sql.Stmt)
	}
	c.m[q] = st
	return st, nil
}

// lookup returns q's statement if it is prepared, and never prepares.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

// close closes every statement; the cache is empty afterwards.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// queryRow runs a constant single-row query on db with a statement cached
// in c (prepared with the store's context). When it cannot be prepared,
// the query runs directly and reports the error.
func (s *Store) queryRow(ctx context.Context, c *stmtCache, db *sql.DB, q string, args ...any) *sql.Row {
	if st, err := c.get(s.ctx, db, q); err == nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.QueryRowContext(ctx, q, args...)
}

// readQuery runs a constant query on the read pool with a cached
// statement (parsing the SQL again was most of the cost of a short query
// asked for every page, such as the list of mailboxes).
func (s *Store) readQuery(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st, err := s.rstmts.get(s.ctx, s.rdb, q); err == nil {
		return st.QueryContext(ctx, args...)
	}
	return s.rdb.QueryContext(ctx, q, args...)
}

// readRow runs a constant single-row query on the read pool.
func (s *Store) readRow(ctx context.Context, q string, args ...any) *sql.Row {
	return s.queryRow(ctx, &s.rstmts, s.rdb, q, args...)
}

// learnWriterStmts prepares, on the writer's connection and at the
// database level, the queries a batch had to prepare for its transaction
// alone, so that later batches reuse them (batchStmts.get). The writer
// calls it between transactions, when its one connection is free.
func (s *Store) learnWriterStmts(qs []string) {
	for _, q := range qs {
		s.wstmts.get(s.ctx, s.wdb, q)
	}
}

// stmtRef names a constant query of a read transaction; readTx sets st to
// its statement prepared for the transaction.
type stmtRef struct {
	q  string
	st *sql.Stmt
}

// readStmts sets st of each ref to its query prepared on the read pool
// (cached). It is called before a read transaction begins, since preparing
// needs a free connection; the transaction then takes each statement with
// Tx.StmtContext, which prepares it once per pooled connection.
func (s *Store) readStmts(refs []*stmtRef) error {
	for _, r := range refs {
		st, err := s.rstmts.get(s.ctx, s.rdb, r.q)
		if err != nil {
			return fmt.Errorf("sqlite store: prepare read query: %w", err)
		}
		r.st = st
	}
	return nil
}
