package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// The full-text index stores, for each blob, the distinct words of its
// case-folded searchable text (store.SearchableText): maximal runs of word
// bytes, which are the bytes FTS5's ascii tokenizer keeps inside a token
// (ASCII letters and digits, and every byte of a multi-byte UTF-8
// sequence). The text is folded by search and indexer alike, so FTS5 only
// splits the space-separated list the indexer hands it.
//
// Why words answer substring search exactly: a needle made only of word
// bytes cannot span a separator, so it occurs in the text if and only if
// it occurs inside one of the text's words. Search finds every indexed
// word that contains the needle in the vocabulary (all distinct words
// ever indexed, kept in index.db as a few long newline-separated rows and
// scanned with bytes.Index) and asks FTS5 for the blobs holding any of
// them. A needle with separators is split into its word runs; each run
// occurs inside some word of every matching text, so those blobs are
// candidates that search then verifies.

// isWordByte reports whether c belongs inside a word (see above).
func isWordByte(c byte) bool {
	return c >= 0x80 || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z'
}

// eachWord calls f with every maximal run of word bytes of s.
func eachWord(s string, f func(string)) {
	start := -1
	for i := 0; i < len(s); i++ {
		if isWordByte(s[i]) {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			f(s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		f(s[start:])
	}
}

// wordSet collects the distinct words of one column of a blob; the zero
// value is ready and is reused. Its table is open addressing on
// hash/maphash with linear probing, at most half full, and compares the
// words themselves: with Go maps of strings, looking each word up and
// adding the new ones was a fifth of the indexer's CPU time.
type wordSet struct {
	slots []wordSlot // a power of two long
	used  []int      // the slots filled for this text, to empty them
	buf   []byte
}

type wordSlot struct {
	h uint64
	w string // "" when empty: words are never empty
}

var wordSeed = maphash.MakeSeed()

// terms returns the distinct words of s, space-separated, and adds each
// to batch (the words of the whole indexing batch).
func (w *wordSet) terms(s string, batch map[string]struct{}) string {
	w.buf = w.buf[:0]
	eachWord(s, func(word string) {
		if !w.add(word) {
			return
		}
		batch[word] = struct{}{}
		w.buf = append(w.buf, word...)
		w.buf = append(w.buf, ' ')
	})
	for _, i := range w.used { // empty, and let go of s
		w.slots[i] = wordSlot{}
	}
	w.used = w.used[:0]
	return string(w.buf)
}

// add adds word and reports whether it was new.
func (w *wordSet) add(word string) bool {
	if 2*(len(w.used)+1) > len(w.slots) {
		w.grow()
	}
	h := maphash.String(wordSeed, word)
	mask := len(w.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		sl := &w.slots[i]
		if sl.w == "" {
			*sl = wordSlot{h, word}
			w.used = append(w.used, i)
			return true
		}
		if sl.h == h && sl.w == word {
			return false
		}
	}
}

// grow doubles the table (1024 slots at first) and adds the words again.
func (w *wordSet) grow() {
	old, oldUsed := w.slots, w.used
	w.slots, w.used = make([]wordSlot, max(2*len(old), 1024)), make([]int, 0, cap(oldUsed))
	for _, k := range oldUsed {
		w.add(old[k].w)
	}
}

// vocabChunk is the size at which the indexer starts a new vocabulary row.
const vocabChunk = 64 << 10

// scanVocab appends to out[i] every word of the vocabulary rows data
// (newline-terminated words) that contains needles[i].
func scanVocab(data []byte, needles []string, out [][]string) {
	for i, n := range needles {
		nb := []byte(n)
		for off := 0; off < len(data); {
			k := bytes.Index(data[off:], nb)
			if k < 0 {
				break
			}
			k += off
			start := bytes.LastIndexByte(data[:k], '\n') + 1
			end := len(data)
			if e := bytes.IndexByte(data[k:], '\n'); e >= 0 {
				end = k + e
			}
			out[i] = append(out[i], string(data[start:end]))
			off = end + 1
		}
	}
}

// vocabCache keeps the vocabulary rows that no longer change (every row
// but the last: the indexer only appends to the last row and starts new
// ones) between searches, so that a search reads one row of at most
// vocabChunk bytes from index.db instead of all of them (2.6 MB for the
// 21k mailbox, 2–3 ms). The indexer drops it after vocabIdle without a
// search.
type vocabCache struct {
	mu   sync.Mutex
	db   *sql.DB  // the handle the rows came from (a rebuilt index is another)
	rows [][]byte // rows 1..len(rows)
	used time.Time
}

const vocabIdle = 2 * time.Minute

// words scans the vocabulary once and returns, for each needle, the
// indexed words that contain it.
func (c *vocabCache) words(ctx context.Context, db *sql.DB, needles []string) ([][]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db != db {
		c.db, c.rows = db, nil
	}
	c.used = time.Now()
	rows, err := db.QueryContext(ctx, "SELECT id, data FROM vocab WHERE id > ? ORDER BY id", len(c.rows))
	if err != nil {
		return nil, fmt.Errorf("full-text vocabulary: %w", err)
	}
	defer rows.Close()
	var fresh [][]byte
	for rows.Next() {
		var id int64
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, fmt.Errorf("full-text vocabulary: %w", err)
		}
		if id != int64(len(c.rows)+len(fresh)+1) {
			return nil, fmt.Errorf("full-text vocabulary: row %d after %d", id, len(c.rows)+len(fresh))
		}
		fresh = append(fresh, data)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("full-text vocabulary: %w", err)
	}
	if len(fresh) > 1 {
		c.rows = append(c.rows, fresh[:len(fresh)-1]...)
		fresh = fresh[len(fresh)-1:]
	}
	out := make([][]string, len(needles))
	for _, data := range c.rows {
		scanVocab(data, needles, out)
	}
	for _, data := range fresh {
		scanVocab(data, needles, out)
	}
	return out, nil
}

// dropIdle forgets the cached rows when no search used them for a while.
func (c *vocabCache) dropIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows != nil && time.Since(c.used) > vocabIdle {
		c.db, c.rows = nil, nil
	}
}

// orTerms writes words as an FTS5 disjunction of quoted strings (a word
// holds no '"'), restricted to column col unless it is "".
func orTerms(col string, words []string) string {
	var b strings.Builder
	if col != "" {
		b.WriteString(col)
		b.WriteString(" : ")
	}
	b.WriteByte('(')
	for i, w := range words {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('"')
		b.WriteString(w)
		b.WriteByte('"')
	}
	b.WriteByte(')')
	return b.String()
}
