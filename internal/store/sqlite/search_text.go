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
	"strings"
	"sync"

	"pimail/internal/store"
)

// maxQueryTrigrams bounds the trigrams of one full-text query: a long
// needle is already selective with a few, and verification is exact.
const maxQueryTrigrams = 24

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

// resolveText computes the matching blobs of every text criterion:
// candidates are the full-text matches among indexed blobs (id <= the
// high-water mark) plus every blob of the mailbox not indexed yet; each
// candidate is then verified against its decoded text, because the
// trigram index (detail=none) answers a superset.
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
	blobs, err := p.mailboxBlobs(ctx)
	if err != nil {
		return err
	}
	hwm := int64(0)
	var db *sql.DB
	if p.s.fts != nil && !p.s.fts.broken.Load() {
		hwm = p.s.fts.hwm.Load()
		db = p.s.fts.db.Load()
	}
	for _, t := range crits {
		t.cand = map[int64]struct{}{}
		t.match = map[int64]struct{}{}
		fq := ftsQuery(t.key)
		var hits map[int64]struct{}
		if db != nil && fq != "" && hwm > 0 {
			hits, err = ftsMatch(ctx, db, fq, hwm)
			if err != nil {
				if isCorrupt(err) {
					p.s.fts.broken.Store(true)
				}
				p.s.log.Warn("full-text query failed; reading messages instead", "err", err)
				hits = nil
			}
		}
		for _, id := range blobs {
			if hits == nil || id > hwm {
				t.cand[id] = struct{}{}
			} else if _, ok := hits[id]; ok {
				t.cand[id] = struct{}{}
			}
		}
	}
	return p.verify(ctx, crits)
}

// mailboxBlobs lists the distinct blobs of the mailbox's messages.
func (p *searchPlan) mailboxBlobs(ctx context.Context) ([]int64, error) {
	rows, err := p.tx.QueryContext(ctx, "SELECT DISTINCT blob_id FROM mail WHERE mailbox_id = ?", p.mailboxID)
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

// ftsQuery is the FTS5 query of a criterion: the conjunction of the terms
// of the needle's trigrams (fts_terms.go), and of the field name's for
// HEADER, which SearchableText writes as "name: value". "" when the index
// cannot narrow the search (needles shorter than three bytes).
func ftsQuery(k textKey) string {
	var terms []string
	add := func(s string) {
		grams := needleTerms(s)
		if len(grams) > maxQueryTrigrams {
			// Keep an even spread, the first and the last.
			step := float64(len(grams)-1) / float64(maxQueryTrigrams-1)
			picked := make([]string, 0, maxQueryTrigrams)
			for i := range maxQueryTrigrams {
				picked = append(picked, grams[int(float64(i)*step+0.5)])
			}
			grams = picked
		}
		terms = append(terms, grams...)
	}
	if k.op == store.SearchHeader {
		add(k.field + ": ")
	}
	add(k.needle)
	return strings.Join(terms, " AND ")
}

// ftsMatch runs a full-text query on index.db and returns the matching
// blob ids up to hwm.
func ftsMatch(ctx context.Context, db *sql.DB, query string, hwm int64) (map[int64]struct{}, error) {
	rows, err := db.QueryContext(ctx, "SELECT rowid FROM fts WHERE fts MATCH ? AND rowid <= ?", query, hwm)
	if err != nil {
		return nil, fmt.Errorf("full-text query: %w", err)
	}
	defer rows.Close()
	hits := map[int64]struct{}{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("full-text query: %w", err)
		}
		hits[id] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("full-text query: %w", err)
	}
	return hits, nil
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
