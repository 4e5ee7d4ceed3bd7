package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// Group commit of deliveries. Writers of one mailbox take turns on its
// row's lock, which each holds until its commit is flushed (mutate.go):
// one transaction per message would let one mailbox take about one
// message per WAL flush, whatever the number of senders. So Deliver and
// Append hand their message to the batcher goroutine, which stores every
// message waiting (up to maxBatch) in one transaction with one commit,
// the idea of SQLite's writer (store/sqlite) and of PostgreSQL's own
// commit_delay. When the previous batch held more than one message,
// messages are arriving concurrently, and the batcher waits groupWait for
// more before it begins.
//
// A node runs several batchers (batchers), so that while one batch waits
// for a mailbox's lock or its commit's flush, others write their blobs:
// a message's search text and its trigram indexes are most of what a
// delivery costs the database (docs/benchmarks.md), and one batcher
// would leave a node's deliveries one core of it. Batchers of one node
// relate to each other as those of different nodes do.
//
// Inside a batch, every blob is stored first; then the mailboxes are
// taken in (account, name) order and the accounts' usage in account
// order, the order every writer locks them in, so that two nodes' batches
// never wait for each other. A batch that fails (a message for an unknown
// account, a lost deadlock) is rolled back whole and its messages are
// stored one transaction each, so that one's failure is only its own.

const (
	maxBatch     = 64
	groupWait    = time.Millisecond
	batchers     = 4
	batchTimeout = time.Minute // a batch's transaction, retries included
)

// storeReq is one Deliver or Append waiting for the batcher.
type storeReq struct {
	ctx     context.Context
	nb      *newBlob
	idate   int64
	targets []target
	blobID  int64
	out     []store.Delivered
	done    chan error
}

// submit queues r and waits for its answer. Once queued, r is always
// answered, by a batcher or by Close for what no batcher took, and only
// then does submit return: until then a batch may read r's message, whose
// bytes belong to the caller (Deliver keeps no reference once it
// returns; a spooled message's mapping is unmapped right after).
func (s *Store) submit(r *storeReq) error {
	s.submitMu.RLock()
	if s.ctx.Err() != nil {
		s.submitMu.RUnlock()
		return errClosed
	}
	select {
	case s.batchQ <- r:
	case <-r.ctx.Done():
		s.submitMu.RUnlock()
		return r.ctx.Err()
	case <-s.ctx.Done():
		s.submitMu.RUnlock()
		return errClosed
	}
	s.submitMu.RUnlock()
	return <-r.done
}

// closeQueue answers, after the batchers have stopped, the requests they
// left in the queue. Taking submitMu after the store's context is
// cancelled waits out every submit that is putting a request in; later
// ones see the context and return.
func (s *Store) closeQueue() {
	s.submitMu.Lock()
	defer s.submitMu.Unlock()
	for {
		select {
		case r := <-s.batchQ:
			r.done <- errClosed
		default:
			return
		}
	}
}

var errClosed = errors.New("postgres store: closed")

// batcher runs batches until Close.
func (s *Store) batcher() {
	defer s.wg.Done()
	last := 0
	for {
		var batch []*storeReq
		select {
		case r := <-s.batchQ:
			batch = append(batch, r)
		case <-s.ctx.Done():
			return
		}
		if last > 1 {
			t := time.NewTimer(groupWait)
		wait:
			for len(batch) < maxBatch {
				select {
				case r := <-s.batchQ:
					batch = append(batch, r)
				case <-t.C:
					break wait
				}
			}
			t.Stop()
		}
	more:
		for len(batch) < maxBatch {
			select {
			case r := <-s.batchQ:
				batch = append(batch, r)
			default:
				break more
			}
		}
		last = len(batch)
		s.runBatch(batch)
	}
}

// runBatch stores the batch in one transaction, or, when that fails, each
// request in one of its own, and answers every request.
func (s *Store) runBatch(batch []*storeReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// Close does not cut a batch short: its messages commit or fail on
	// their own (a query cancelled mid-way would also cost Close up to
	// pgx's 15 s for the connection's close).
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	err := s.write(ctx, func(w *wtx) error { return storeBatch(w, live) })
	if err == nil || len(live) == 1 {
		for _, r := range live {
			r.done <- err
		}
		return
	}
	for _, r := range live {
		r.done <- s.write(r.ctx, func(w *wtx) error { return storeBatch(w, []*storeReq{r}) })
	}
}

// slot is one target of one request of a batch.
type slot struct {
	req, target int
	mailbox     *store.Mailbox // locked
	uid         uint32
	modseq      uint64
}

// mailboxKey names a mailbox by account and name.
type mailboxKey struct {
	account int64
	name    string
}

// storeBatch writes the requests' blobs and mail rows, a handful of
// statements for the whole batch (see the top of the file for the
// order); each request's rows take consecutive UIDs of its mailbox, in
// the order of the requests.
func storeBatch(w *wtx, reqs []*storeReq) error {
	nbs := make([]*newBlob, len(reqs))
	refs := make([]int, len(reqs))
	for i, r := range reqs {
		nbs[i], refs[i] = r.nb, len(r.targets)
	}
	blobs, err := ensureBlobs(w, nbs, refs)
	if err != nil {
		return err
	}
	byID, byName, err := lockTargets(w, reqs)
	if err != nil {
		return err
	}
	var slots []slot
	counts := map[int64]int{}
	for ri, r := range reqs {
		r.blobID = blobs[ri]
		for ti, t := range r.targets {
			mb := byID[t.mailboxID]
			if t.mailboxID == 0 {
				mb = byName[mailboxKey{t.accountID, t.name}]
			}
			if mb == nil {
				return fmt.Errorf("mailbox %d %q of account %d: %w", t.mailboxID, t.name, t.accountID, store.ErrNotFound)
			}
			slots = append(slots, slot{req: ri, target: ti, mailbox: mb})
			counts[mb.ID]++
		}
	}
	// UIDs and MODSEQs for every row of a mailbox at once: UIDNEXT and
	// HIGHESTMODSEQ move by the number of rows (RFC 9051 §2.3.1.1, RFC
	// 7162 §3.1), each row takes the next of both.
	ids := make([]int64, 0, len(counts))
	ns := make([]int32, 0, len(counts))
	for id, n := range counts {
		ids, ns = append(ids, id), append(ns, int32(n))
	}
	rows, _ := w.query(`UPDATE mailboxes m SET uidnext = m.uidnext + c.n, highestmodseq = m.highestmodseq + c.n
		FROM unnest($1::bigint[], $2::integer[]) AS c(id, n) WHERE m.id = c.id
		RETURNING m.id, m.uidnext - c.n, m.highestmodseq - c.n + 1`, ids, ns)
	type next struct {
		uid    int64
		modseq uint64
	}
	nexts := map[int64]*next{}
	var id int64
	var nx next
	if _, err := pgx.ForEachRow(rows, []any{&id, &nx.uid, &nx.modseq}, func() error {
		n := nx
		nexts[id] = &n
		return nil
	}); err != nil {
		return fmt.Errorf("take uids: %w", err)
	}
	n := len(slots)
	mbs, uids, modseqs, flags, kws, idates, blobIDs := make([]int64, n), make([]int64, n), make([]int64, n),
		make([]int32, n), make([]string, n), make([]int64, n), make([]int64, n)
	usage := map[int64]int64{}
	for i, sl := range slots {
		r, t := reqs[sl.req], reqs[sl.req].targets[sl.target]
		nx := nexts[sl.mailbox.ID]
		if nx == nil || nx.uid > maxUID {
			return fmt.Errorf("mailbox %d: UID space exhausted: %w", sl.mailbox.ID, store.ErrInvalid)
		}
		mbs[i], uids[i], modseqs[i] = sl.mailbox.ID, nx.uid, int64(nx.modseq)
		flags[i], kws[i], idates[i], blobIDs[i] = int32(t.flags), store.JoinKeywords(t.keywords), r.idate, r.blobID
		r.out[sl.target] = store.Delivered{AccountID: sl.mailbox.AccountID, MailboxID: sl.mailbox.ID,
			UIDValidity: sl.mailbox.UIDValidity, UID: uint32(nx.uid)}
		nx.uid++
		nx.modseq++
		usage[sl.mailbox.AccountID] += int64(len(r.nb.raw))
		w.publish(sl.mailbox.AccountID, sl.mailbox.ID)
	}
	if _, err := w.exec(`INSERT INTO mail (mailbox_id, uid, modseq, created_modseq, flags, keywords, internal_date, blob_id)
		SELECT mb, u, ms, ms, f, k, d, b FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::integer[], $5::text[],
			$6::bigint[], $7::bigint[]) AS r(mb, u, ms, f, k, d, b)`,
		mbs, uids, modseqs, flags, kws, idates, blobIDs); err != nil {
		return fmt.Errorf("insert messages: %w", err)
	}
	return addUsages(w, usage)
}

// lockTargets locks the requests' mailboxes in (account, name) order,
// creating the ones a delivery names that do not exist, and returns them
// by ID and by name.
func lockTargets(w *wtx, reqs []*storeReq) (map[int64]*store.Mailbox, map[mailboxKey]*store.Mailbox, error) {
	var ids, accounts []int64
	var names []string
	for _, r := range reqs {
		r.out = make([]store.Delivered, len(r.targets))
		for _, t := range r.targets {
			if t.mailboxID != 0 {
				ids = append(ids, t.mailboxID)
			} else {
				accounts, names = append(accounts, t.accountID), append(names, t.name)
			}
		}
	}
	byID := map[int64]*store.Mailbox{}
	byName := map[mailboxKey]*store.Mailbox{}
	rows, _ := w.query("SELECT "+mailboxCols+` FROM mailboxes WHERE id = ANY($1)
		OR (account_id, name) IN (SELECT * FROM unnest($2::bigint[], $3::text[]))
		ORDER BY account_id, name FOR UPDATE`, ids, accounts, names)
	mbs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Mailbox, error) { return scanMailbox(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("lock mailboxes: %w", err)
	}
	for i := range mbs {
		m := &mbs[i]
		byID[m.ID] = m
		byName[mailboxKey{m.AccountID, m.Name}] = m
	}
	// Mailboxes a delivery names that are not there (a Sieve fileinto
	// :create, or a recipient without INBOX): created, and so locked.
	for i, acc := range accounts {
		k := mailboxKey{acc, names[i]}
		if byName[k] != nil {
			continue
		}
		if err := accountExists(w, acc); err != nil {
			return nil, nil, err
		}
		m, err := createMailbox(w, acc, k.name, store.SpecialNone)
		if isExists(err) {
			// Another node created it meanwhile.
			m, err = lockMailbox(w, 0, acc, k.name)
		}
		if err != nil {
			return nil, nil, err
		}
		byID[m.ID], byName[k] = &m, &m
	}
	return byID, byName, nil
}
