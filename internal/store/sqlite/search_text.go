package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"pimail/internal/store"
)

// maxOrWords bounds the words of one FTS5 disjunction: a needle found in
// more words is looked up in several queries (exact) or, when candidates
// are verified anyway, not used to narrow them.
const maxOrWords = 500

// textKey identifies one text criterion of a program.
type textKey struct {
	op     store.SearchOp
	field  string // lower case, SearchHeader only
	needle string // lower case
}

func keyOf(q store.SearchQuery) textKey {
	k := textKey{op: q.Op, needle: strings.ToLower(q.Text)}
	if q.Op == store.SearchHeader {
		k.field = strings.ToLower(q.Field)
	}
	return k
}

// textCrit is a TEXT, BODY or HEADER criterion and the blobs of the
// mailbox that satisfy it.
type textCrit struct {
	key   textKey
	all   bool               // every message matches (empty TEXT or BODY needle)
	cand  map[int64]struct{} // blobs to verify
	match map[int64]struct{} // verified
}

func (t *textCrit) matchList() []int64 {
	ids := make([]int64, 0, len(t.match))
	for id := range t.match {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// collectText finds the text criteria of the program.
func (p *searchPlan) collectText(q store.SearchQuery, depth int) error {
	if depth > maxSearchDepth {
		return fmt.Errorf("search program nested too deeply: %w", store.ErrInvalid)
	}
	switch q.Op {
	case store.SearchHeader, store.SearchBody, store.SearchText:
		k := keyOf(q)
		if _, ok := p.texts[k]; !ok {
			p.texts[k] = &textCrit{key: k, all: k.needle == "" && q.Op != store.SearchHeader}
		}
	}
	for _, ch := range q.Children {
		if err := p.collectText(ch, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// resolveText computes the matching blobs of every text criterion. Among
// indexed blobs (id <= the high-water mark) the full-text index answers a
// needle without separators exactly; for other criteria it gives
// candidates, which are verified against their decoded text together
// with every blob of the mailbox not indexed yet.
func (p *searchPlan) resolveText(ctx context.Context) error {
	var crits []*textCrit
	for _, t := range p.texts {
		if !t.all {
			crits = append(crits, t)
		}
	}
	if len(crits) == 0 {
		return nil
	}
	hwm := int64(0)
	var db *sql.DB
	if p.s.fts != nil && !p.s.fts.broken.Load() {
		hwm = p.s.fts.hwm.Load()
		db = p.s.fts.db.Load()
	}
	// The mailbox's pending blobs, and all its blobs, read when needed.
	var pending, all []int64
	var readPending, readAll bool
	loadAll := func() (err error) {
		if !readAll {
			all, err = p.blobsAbove(ctx, -1)
			readAll = err == nil
		}
		return err
	}
	// covered says whether hits hold every indexed blob of the mailbox.
	covered := func(hits map[int64]struct{}) bool {
		if len(hits) < len(all) || loadAll() != nil {
			return false
		}
		for _, id := range all {
			if _, ok := hits[id]; !ok && id <= hwm {
				return false
			}
		}
		return true
	}
	var err error
	for _, t := range crits {
		t.cand = map[int64]struct{}{}
		t.match = map[int64]struct{}{}
		var hits map[int64]struct{}
		exact := false
		if db != nil && hwm > 0 {
			hits, exact, err = p.s.fts.lookup(ctx, db, t.key, hwm, covered)
			if err != nil {
				if isCorrupt(err) {
					p.s.fts.broken.Store(true)
				}
				p.s.log.Warn("full-text query failed; reading messages instead", "err", err)
				hits, exact = nil, false
			}
		}
		if exact {
			// Blobs of other mailboxes among the hits are harmless: the
			// final query only looks at this mailbox's rows.
			t.match = hits
			if !readPending {
				if pending, err = p.blobsAbove(ctx, hwm); err != nil {
					return err
				}
				readPending = true
			}
			for _, id := range pending {
				t.cand[id] = struct{}{}
			}
			if len(pending) > 0 {
				// The next search should find them in the index.
				p.s.fts.kickNow()
			}
			continue
		}
		if err := loadAll(); err != nil {
			return err
		}
		for _, id := range all {
			if hits == nil || id > hwm {
				t.cand[id] = struct{}{}
			} else if _, ok := hits[id]; ok {
				t.cand[id] = struct{}{}
			}
		}
	}
	return p.verify(ctx, crits)
}

// lookup asks the full-text index (fts_terms.go) for the blobs up to
// hwm that may satisfy criterion k. exact says that hits are exactly the
// matching ones; otherwise they are candidates to verify, and nil hits
// mean the index cannot narrow the search at all. covered says whether
// hits hold every indexed blob of the mailbox already (a needle found in
// thousands of words is looked up a chunk of them at a time).
func (ix *ftsIndex) lookup(ctx context.Context, db *sql.DB, k textKey, hwm int64, covered func(map[int64]struct{}) bool) (hits map[int64]struct{}, exact bool, err error) {
	col := ""
	switch k.op {
	case store.SearchBody:
		col = "b"
	case store.SearchHeader:
		col = "h"
	}
	var runs []string
	if k.op == store.SearchHeader {
		eachWord(k.field, func(w string) { runs = append(runs, w) })
	}
	eachWord(k.needle, func(w string) { runs = append(runs, w) })
	if len(runs) == 0 {
		return nil, false, nil
	}
	// TEXT and BODY with a needle of word bytes only: exact.
	exact = k.op != store.SearchHeader && len(runs) == 1 && runs[0] == k.needle
	words, err := ix.vocab.words(ctx, db, runs)
	if err != nil {
		return nil, false, err
	}
	hits = map[int64]struct{}{}
	if exact {
		for ws := words[0]; len(ws) > 0; ws = ws[min(len(ws), maxOrWords):] {
			if err := ftsMatch(ctx, db, orTerms(col, ws[:min(len(ws), maxOrWords)]), hwm, hits); err != nil {
				return nil, false, err
			}
			if len(ws) > maxOrWords && covered(hits) {
				break // a short needle in most words: no need to look further
			}
		}
		return hits, true, nil
	}
	var and []string
	for _, ws := range words {
		switch {
		case len(ws) == 0:
			// No indexed text holds this run: nothing matches.
			return hits, false, nil
		case len(ws) <= maxOrWords:
			and = append(and, orTerms(col, ws))
		}
	}
	if len(and) == 0 {
		return nil, false, nil
	}
	if err := ftsMatch(ctx, db, strings.Join(and, " AND "), hwm, hits); err != nil {
		return nil, false, err
	}
	return hits, false, nil
}

// blobsAbove lists the blobs of the mailbox's messages with an id above
// above: the pending ones (above = the index's high-water mark) through
// the index on blob_id, all of them (above < 0) through the mailbox's
// rows. A blob may be listed twice.
func (p *searchPlan) blobsAbove(ctx context.Context, above int64) ([]int64, error) {
	q, args := "SELECT blob_id FROM mail WHERE blob_id > ? AND +mailbox_id = ?", []any{above, p.mailboxID}
	if above < 0 {
		q, args = "SELECT blob_id FROM mail WHERE mailbox_id = ?", []any{p.mailboxID}
	}
	rows, err := p.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: search: list blobs: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite store: search: list blobs: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: search: list blobs: %w", err)
	}
	return ids, nil
}

// ftsMatch runs a full-text query on index.db and adds the matching blob
// ids up to hwm to hits. The ids come back as one string: the driver
// costs about 2 µs a row (fetch_agg.go).
func ftsMatch(ctx context.Context, db *sql.DB, query string, hwm int64, hits map[int64]struct{}) error {
	var ids string
	if err := db.QueryRowContext(ctx, "SELECT coalesce(group_concat(rowid, ' '), '') FROM fts WHERE fts MATCH ? AND rowid <= ?", query, hwm).Scan(&ids); err != nil {
		return fmt.Errorf("full-text query: %w", err)
	}
	for f := range strings.FieldsSeq(ids) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return fmt.Errorf("full-text query: bad id %q", f)
		}
		hits[id] = struct{}{}
	}
	return nil
}

// verify reads every candidate blob once and keeps those whose text
// satisfies each criterion. Blobs are read by a pool of workers.
func (p *searchPlan) verify(ctx context.Context, crits []*textCrit) error {
	union := map[int64]struct{}{}
	for _, t := range crits {
		for id := range t.cand {
			union[id] = struct{}{}
		}
	}
	if len(union) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(union))
	for id := range union {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	metas, err := p.blobMeta(ctx, ids)
	if err != nil {
		return err
	}
	type result struct {
		id   int64
		hits []bool // per crit
		err  error
	}
	work := make(chan blobMeta)
	out := make(chan result)
	workers := max(1, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bm := range work {
				r := result{id: bm.id, hits: make([]bool, len(crits))}
				raw, err := p.s.readRaw(ctx, bm.id, bm.sha)
				if errors.Is(err, os.ErrNotExist) {
					out <- r // collected: no row can point at it any more
					continue
				}
				if err != nil {
					r.err = fmt.Errorf("sqlite store: search: read blob %d: %w", bm.id, err)
					out <- r
					continue
				}
				parsed := decodeParsed(bm.parsed)
				var text *store.SearchableText
				for i, t := range crits {
					if _, ok := t.cand[bm.id]; !ok {
						continue
					}
					switch t.key.op {
					case store.SearchHeader:
						r.hits[i] = store.HeaderFieldContains(raw, parsed, t.key.field, t.key.needle)
					default:
						if text == nil {
							st := store.ExtractSearchableText(raw, parsed)
							text = &st
						}
						r.hits[i] = strings.Contains(text.Body, t.key.needle) ||
							t.key.op == store.SearchText && strings.Contains(text.Header, t.key.needle)
					}
				}
				out <- r
			}
		}()
	}
	go func() {
		defer close(work)
		for _, bm := range metas {
			select {
			case work <- bm:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(out)
	}()
	var firstErr error
	for r := range out {
		if r.err != nil {
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		for i, ok := range r.hits {
			if ok {
				crits[i].match[r.id] = struct{}{}
			}
		}
	}
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// blobMeta is what verification needs of a blob.
type blobMeta struct {
	id     int64
	sha    string
	parsed []byte
}

func (p *searchPlan) blobMeta(ctx context.Context, ids []int64) ([]blobMeta, error) {
	j, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("encode blob ids: %w", err)
	}
	rows, err := p.tx.QueryContext(ctx, "SELECT id, sha256, parsed FROM blobs WHERE id IN (SELECT value FROM json_each(?))", string(j))
	if err != nil {
		return nil, fmt.Errorf("sqlite store: search: read blobs: %w", err)
	}
	defer rows.Close()
	out := make([]blobMeta, 0, len(ids))
	for rows.Next() {
		var bm blobMeta
		if err := rows.Scan(&bm.id, &bm.sha, &bm.parsed); err != nil {
			return nil, fmt.Errorf("sqlite store: search: read blobs: %w", err)
		}
		out = append(out, bm)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: search: read blobs: %w", err)
	}
	return out, nil
}
