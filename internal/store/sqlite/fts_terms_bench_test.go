package sqlite

import (
	"os"
	"path/filepath"
	"testing"

	"pimail/internal/message"
	"pimail/internal/store"
	"pimail/internal/testcorpus"
)

// BenchmarkTerms is the indexer's Go side of a message: the distinct words
// of its searchable header and body text (wordSet.terms), on ham corpus
// messages.
//
//	go test ./internal/store/sqlite -run XXX -bench Terms
func BenchmarkTerms(b *testing.B) {
	dir, err := testcorpus.LargeDir()
	if err != nil {
		b.Skip(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ham", "*.eml"))
	var texts []store.SearchableText
	total := 0
	for _, f := range files[:min(len(files), 500)] {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		t := store.ExtractSearchableText(raw, message.Parse(raw))
		texts = append(texts, t)
		total += len(t.Header) + len(t.Body)
	}
	b.SetBytes(int64(total / len(texts)))
	b.ReportAllocs()
	var w wordSet
	batch := map[string]struct{}{}
	i := 0
	for b.Loop() {
		if i%indexBatch == 0 {
			clear(batch)
		}
		t := texts[i%len(texts)]
		w.terms(t.Header, batch)
		w.terms(t.Body, batch)
		i++
	}
}
