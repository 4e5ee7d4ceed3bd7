package sqlite

import (
	"bytes"
	"strings"
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
// value is ready and is reused.
type wordSet struct {
	seen map[string]struct{}
	buf  []byte
}

// terms returns the distinct words of s, space-separated, and adds each
// to batch (the words of the whole indexing batch).
func (w *wordSet) terms(s string, batch map[string]struct{}) string {
	if w.seen == nil {
		w.seen = map[string]struct{}{}
	}
	clear(w.seen)
	w.buf = w.buf[:0]
	eachWord(s, func(word string) {
		if _, ok := w.seen[word]; ok {
			return
		}
		w.seen[word] = struct{}{}
		batch[word] = struct{}{}
		w.buf = append(w.buf, word...)
		w.buf = append(w.buf, ' ')
	})
	return string(w.buf)
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
