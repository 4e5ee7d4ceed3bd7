package sqlite

// The full-text index stores, for each blob, the set of distinct byte
// trigrams of its case-folded searchable text (store.SearchableText), each
// written as one five-letter term for FTS5's ascii tokenizer. A needle's
// trigrams are a subset of the trigrams of every text containing it, so the
// conjunction of the needle's terms finds a superset of the matching blobs,
// which search verifies (search_text.go).
//
// Why not FTS5's own trigram tokenizer over the text: it hands FTS5 one
// token per character, and FTS5 pays a hash-table write for each, although
// an 8 KB message has only a third as many distinct trigrams. Deduplicating
// here, with a bitmap, cut the indexer's CPU per message by about half
// (docs/benchmarks.md, SMTP ingest) and gives the same candidates. Byte
// trigrams of UTF-8 rather than character trigrams: a substring of the
// text is a substring of its bytes, and three bytes are exactly a 24-bit
// key, so there is no hashing and no collision.

// trigramBits is the number of possible byte trigrams.
const trigramBits = 1 << 24

// termAlphabet writes a 24-bit trigram in five base-32 digits (25 bits),
// all of which the ascii tokenizer keeps inside one token and folds to
// themselves.
const termAlphabet = "0123456789abcdefghijklmnopqrstuv"

// trigramSet collects distinct byte trigrams. The zero value is ready; its
// bitmap (2 MiB) is allocated on first use and reused: terms clears only
// the bits that were set.
type trigramSet struct {
	bits []uint64
	keys []uint32
}

// add adds the trigrams of s.
func (t *trigramSet) add(s string) {
	if len(s) < 3 {
		return
	}
	if t.bits == nil {
		t.bits = make([]uint64, trigramBits/64)
	}
	k := uint32(s[0])<<8 | uint32(s[1])
	for i := 2; i < len(s); i++ {
		k = (k<<8 | uint32(s[i])) & (trigramBits - 1)
		w, b := k>>6, uint64(1)<<(k&63)
		if t.bits[w]&b == 0 {
			t.bits[w] |= b
			t.keys = append(t.keys, k)
		}
	}
}

// terms appends the collected trigrams to dst as space-separated terms, in
// the order they were first seen, and empties the set.
func (t *trigramSet) terms(dst []byte) []byte {
	for _, k := range t.keys {
		dst = appendTerm(dst, k)
		dst = append(dst, ' ')
		t.bits[k>>6] &^= uint64(1) << (k & 63)
	}
	t.keys = t.keys[:0]
	return dst
}

// len is the number of trigrams collected.
func (t *trigramSet) len() int { return len(t.keys) }

func appendTerm(dst []byte, k uint32) []byte {
	return append(dst,
		termAlphabet[k>>20&31], termAlphabet[k>>15&31], termAlphabet[k>>10&31],
		termAlphabet[k>>5&31], termAlphabet[k&31])
}

// needleTerms returns the distinct terms of s in order of first
// appearance (a small needle: no bitmap).
func needleTerms(s string) []string {
	var out []string
	seen := map[uint32]bool{}
	for i := 0; i+3 <= len(s); i++ {
		k := uint32(s[i])<<16 | uint32(s[i+1])<<8 | uint32(s[i+2])
		if !seen[k] {
			seen[k] = true
			out = append(out, string(appendTerm(nil, k)))
		}
	}
	return out
}
