package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite "modernc.org/sqlite"

	"pimail/internal/message"
	"pimail/internal/store"
)

// Reading a chunk of FETCH rows through an aggregate function.
//
// The driver (modernc.org/sqlite) costs far more per row and column than
// SQLite's own stepping: every column read is two locked calls into the
// library and a conversion in database/sql, about 2 µs for the eight
// columns of a FETCH row against 0.7 µs for SQLite to step the join. So
// the FETCH paths run one statement per chunk whose only result is an
// aggregate, pimail_fetch_rows, and the aggregate's step — called by
// SQLite for each row, with the column values as arguments and no copy of
// the strings and blobs (VolatileArgs) — builds the chunk's
// store.MessageMeta values and copies the envelope or header bytes into an
// arena, on the goroutine that runs the query. The statement returns a
// single row (the row count), and the bytes are never copied again:
// callers slice the arena.

// fetchSink is where pimail_fetch_rows puts one query's rows.
type fetchSink struct {
	mailboxID int64
	uids      store.UIDSet // the rows wanted; the query may return more
	metas     []store.MessageMeta
	data      [][]byte // data[i] of metas[i]: envelope or header; nil when NULL
	noFetch   []int    // indexes of metas whose blob has no blob_fetch row
	arena     []byte   // current block; earlier blocks are referenced by data
	pooled    bool     // arena blocks come from arenaPool (released by the caller)
	blocks    []*[]byte
	bufs      *chunkBufs // pooled: where metas and data come from
}

// chunkBufs are the slices of one buffered chunk, reused through
// chunkPool: a chunk's Parsed values alone are 90 KB of memory that Go
// would zero and the collector scan on every chunk.
type chunkBufs struct {
	metas  []store.MessageMeta
	data   [][]byte
	parsed []message.Parsed
	addrs  []message.Address
}

var chunkPool = sync.Pool{New: func() any {
	return &chunkBufs{
		metas:  make([]store.MessageMeta, 0, fetchLiteCap),
		data:   make([][]byte, 0, fetchLiteCap),
		parsed: make([]message.Parsed, 0, fetchLiteCap),
		addrs:  make([]message.Address, 0, 8*fetchLiteCap),
	}
}}

// arenaBlock is the size of an arena block: below the 32 KB from which Go
// allocates a block as a large object (zeroed pages of its own, often
// faulted in again after the scavenger returned them), 40 envelopes or 10
// headers of a mailing list. Pooled blocks are larger: they are allocated
// once.
const (
	arenaBlock  = 16 << 10
	pooledBlock = 256 << 10
)

// arenaPool holds the arena blocks of the buffered fetches
// (FetchEnvelopesBuffered, FetchHeadersBuffered) between chunks.
var arenaPool = sync.Pool{New: func() any { b := make([]byte, 0, pooledBlock); return &b }}

// keep copies b into the arena and returns the copy. Bytes once returned
// are never written again (until the blocks are released to the pool): a
// full block is left to its slices and a new one started, so the copies
// can back strings (unsafe.String).
func (k *fetchSink) keep(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	if cap(k.arena)-len(k.arena) < len(b) {
		switch {
		case k.pooled && len(b) <= pooledBlock:
			p := arenaPool.Get().(*[]byte)
			k.blocks = append(k.blocks, p)
			k.arena = (*p)[:0]
		default:
			k.arena = make([]byte, 0, max(arenaBlock, len(b)))
		}
	}
	n := len(k.arena)
	k.arena = append(k.arena, b...)
	return k.arena[n:len(k.arena):len(k.arena)]
}

// release returns the pooled arena blocks; nothing may use the bytes
// kept in them afterwards.
func (k *fetchSink) release() {
	for _, p := range k.blocks {
		arenaPool.Put(p)
	}
	k.blocks, k.arena = nil, nil
	if b := k.bufs; b != nil {
		// Keep the grown slices (a chunk larger than fetchLiteCap).
		b.metas, b.data = k.metas[:0], k.data[:0]
		chunkPool.Put(b)
		k.bufs, k.metas, k.data = nil, nil, nil
	}
}

// fetchSinks holds the sinks of the queries running now, by the slot
// number passed to pimail_fetch_rows. A slot number below 256 is passed
// to the step as an interface value without an allocation (Go keeps those
// integers preallocated), which a growing id would cost on every row.
var (
	fetchSinks     [256]atomic.Pointer[fetchSink]
	fetchFreeSlots = func() chan int64 {
		c := make(chan int64, len(fetchSinks))
		for i := range len(fetchSinks) {
			c <- int64(i)
		}
		return c
	}()
)

// takeSlot puts k into a free slot and returns its number. A slot is
// taken before the query waits for a pooled connection, so with more
// than 256 queries waiting at once (many sessions fetching), the next
// ones wait here until one ends, or until ctx is done.
func takeSlot(ctx context.Context, k *fetchSink) (int64, error) {
	select {
	case id := <-fetchFreeSlots:
		fetchSinks[id].Store(k)
		return id, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// freeSlot gives a slot of takeSlot back.
func freeSlot(id int64) {
	fetchSinks[id].Store(nil)
	fetchFreeSlots <- id
}

// fetchAgg is one evaluation of pimail_fetch_rows.
type fetchAgg struct {
	sink *fetchSink
	rows int64
}

// Step takes one row: sink id, uid, modseq, flags, keywords,
// internal_date, blob_id, blob_fetch.size (NULL without a blob_fetch
// row), data (envelope or header, NULL when missing). Strings and blobs
// are views into SQLite's memory, valid only during the call.
func (a *fetchAgg) Step(_ *sqlite.FunctionContext, args []driver.Value) error {
	if len(args) != 9 {
		return errors.New("pimail_fetch_rows: wrong number of arguments")
	}
	if a.sink == nil {
		id, _ := args[0].(int64)
		if id < 0 || id >= int64(len(fetchSinks)) {
			return errors.New("pimail_fetch_rows: no such sink")
		}
		if a.sink = fetchSinks[id].Load(); a.sink == nil {
			return errors.New("pimail_fetch_rows: no such sink")
		}
	}
	k := a.sink
	a.rows++
	uid := uint32(argInt(args[1]))
	if !inSet(k.uids, uid) {
		return nil
	}
	m := store.MessageMeta{
		MailboxID:    k.mailboxID,
		UID:          uid,
		ModSeq:       uint64(argInt(args[2])),
		Flags:        store.Flags(argInt(args[3])),
		InternalDate: time.Unix(argInt(args[5]), 0),
		BlobID:       argInt(args[6]),
	}
	switch kw := args[4].(type) {
	case string:
		if kw != "" {
			m.Keywords = store.SplitKeywords(strings.Clone(kw))
		}
	case []byte:
		if len(kw) > 0 {
			m.Keywords = store.SplitKeywords(string(kw))
		}
	}
	if size, ok := args[7].(int64); ok {
		m.Size = size
	} else {
		k.noFetch = append(k.noFetch, len(k.metas))
	}
	var data []byte
	switch d := args[8].(type) {
	case []byte:
		data = k.keep(d)
	case string:
		data = k.keep([]byte(d)) // not expected: the columns are blobs
	}
	k.metas = append(k.metas, m)
	k.data = append(k.data, data)
	return nil
}

func argInt(v driver.Value) int64 {
	n, _ := v.(int64)
	return n
}

func (a *fetchAgg) WindowInverse(*sqlite.FunctionContext, []driver.Value) error {
	return errors.New("pimail_fetch_rows: not a window function")
}

func (a *fetchAgg) WindowValue(*sqlite.FunctionContext) (driver.Value, error) { return a.rows, nil }

func (a *fetchAgg) Final(*sqlite.FunctionContext) {}

func init() {
	sqlite.MustRegisterFunction("pimail_fetch_rows", &sqlite.FunctionImpl{
		NArgs:        9,
		VolatileArgs: true, // Step copies what it keeps
		MakeAggregate: func(sqlite.FunctionContext) (sqlite.AggregateFunction, error) {
			return &fetchAgg{}, nil
		},
	})
}

// The FETCH chunk queries; %s is the UID condition.
const (
	fetchRowsEnvelope = "SELECT pimail_fetch_rows(?, mail.uid, mail.modseq, mail.flags, mail.keywords, mail.internal_date, mail.blob_id, f.size, f.envelope)" +
		" FROM mail LEFT JOIN blob_fetch f ON f.blob_id = mail.blob_id WHERE mail.mailbox_id = ? AND %s"
	fetchRowsHeader = "SELECT pimail_fetch_rows(?, mail.uid, mail.modseq, mail.flags, mail.keywords, mail.internal_date, mail.blob_id, f.size, h.header)" +
		" FROM mail LEFT JOIN blob_fetch f ON f.blob_id = mail.blob_id LEFT JOIN blob_headers h ON h.blob_id = mail.blob_id" +
		" WHERE mail.mailbox_id = ? AND %s"
	// The metadata alone (UIDs, for SELECT).
	fetchRowsMeta = "SELECT pimail_fetch_rows(?, mail.uid, mail.modseq, mail.flags, mail.keywords, mail.internal_date, mail.blob_id, f.size, NULL)" +
		" FROM mail LEFT JOIN blob_fetch f ON f.blob_id = mail.blob_id WHERE mail.mailbox_id = ? AND %s"
	// Without the size (and the blob_fetch lookup per row), for a FETCH
	// that does not ask for RFC822.SIZE.
	fetchRowsHeaderNoSize = "SELECT pimail_fetch_rows(?, mail.uid, mail.modseq, mail.flags, mail.keywords, mail.internal_date, mail.blob_id, 0, h.header)" +
		" FROM mail LEFT JOIN blob_headers h ON h.blob_id = mail.blob_id WHERE mail.mailbox_id = ? AND %s"
)

// fetchRows runs one FETCH chunk query (what: liteEnvelope or
// liteHeader) and returns the rows in uids, in UID order, with their
// envelope or header. It runs a single statement, outside any explicit
// transaction (SQLite reads one snapshot for it), so it never holds a
// pooled connection while waiting for another one.
func (s *Store) fetchRows(ctx context.Context, mailboxID int64, uids store.UIDSet, what int, pooled bool) (*fetchSink, error) {
	k := &fetchSink{mailboxID: mailboxID, uids: uids, pooled: pooled}
	if pooled {
		k.bufs = chunkPool.Get().(*chunkBufs)
		k.metas, k.data = k.bufs.metas[:0], k.bufs.data[:0]
	} else {
		k.metas = make([]store.MessageMeta, 0, fetchLiteCap)
		k.data = make([][]byte, 0, fetchLiteCap)
	}
	id, err := takeSlot(ctx, k)
	if err != nil {
		k.release()
		return nil, err
	}
	defer freeSlot(id)
	q := fetchRowsEnvelope
	switch what {
	case liteHeader:
		q = fetchRowsHeader
	case liteHeaderNoSize:
		q = fetchRowsHeaderNoSize
	case liteMeta:
		q = fetchRowsMeta
	}
	var row *sql.Row
	if lo, hi, ok := oneRange(uids); ok {
		// The common shape (imapd asks in chunks of consecutive
		// messages): one prepared statement.
		// The store's statement cache (stmtcache.go): this goroutine
		// holds no pooled connection here.
		st, err := s.rstmts.get(s.ctx, s.rdb, fmt.Sprintf(q, "mail.uid BETWEEN ? AND ?"))
		if err != nil {
			return nil, fmt.Errorf("prepare fetch query: %w", err)
		}
		row = st.QueryRowContext(ctx, id, mailboxID, lo, hi)
	} else {
		cond, args := uidSetSQL("mail.uid", uids)
		row = s.rdb.QueryRowContext(ctx, fmt.Sprintf(q, cond), append([]any{id, mailboxID}, args...)...)
	}
	var n int64
	if err := row.Scan(&n); err != nil {
		k.release()
		return nil, err
	}
	if len(k.metas) == 0 {
		// Nothing: an empty range, or no such mailbox (ErrNotFound).
		var one int
		err := s.rdb.QueryRowContext(ctx, "SELECT 1 FROM mailboxes WHERE id = ?", mailboxID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			k.release()
			return nil, fmt.Errorf("mailbox %d: %w", mailboxID, store.ErrNotFound)
		}
		if err != nil {
			k.release()
			return nil, fmt.Errorf("mailbox %d: %w", mailboxID, err)
		}
	}
	// SQLite walks mail's primary key (mailbox_id, uid), so the rows
	// arrive in UID order; a different plan must not change the answer.
	if !slices.IsSortedFunc(k.metas, func(a, b store.MessageMeta) int { return cmp.Compare(a.UID, b.UID) }) {
		k.sortByUID()
	}
	return k, nil
}

// sortByUID sorts metas (and data, noFetch with them) by UID.
func (k *fetchSink) sortByUID() {
	idx := make([]int, len(k.metas))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(k.metas[a].UID, k.metas[b].UID) })
	noFetch := make(map[int]bool, len(k.noFetch))
	for _, i := range k.noFetch {
		noFetch[i] = true
	}
	metas := make([]store.MessageMeta, len(idx))
	data := make([][]byte, len(idx))
	k.noFetch = k.noFetch[:0]
	for to, from := range idx {
		metas[to], data[to] = k.metas[from], k.data[from]
		if noFetch[from] {
			k.noFetch = append(k.noFetch, to)
		}
	}
	k.metas, k.data = metas, data
}

// oneRange reports the bounds of a UID set of one range (Stop 0: to the
// end).
func oneRange(uids store.UIDSet) (lo, hi uint32, ok bool) {
	switch len(uids) {
	case 0:
		return 1, 0xffffffff, true
	case 1:
		lo, hi = uids[0].Start, uids[0].Stop
		if hi == 0 {
			hi = 0xffffffff
		}
		if hi < lo {
			lo, hi = hi, lo
		}
		return lo, hi, true
	}
	return 0, 0, false
}
