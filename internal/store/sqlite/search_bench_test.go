package sqlite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

// BenchmarkSearchTextMbox times SEARCH TEXT over a real mailbox from an
// mbox file: PIMAIL_BENCH_MBOX=../../../../shared/corpus/mailbox/mailbox-21k.mbox
// go test -run X -bench SearchTextMbox ./internal/store/sqlite/
// (words in PIMAIL_BENCH_WORDS, space-separated; default: aligned will).
func BenchmarkSearchTextMbox(b *testing.B) {
	path := os.Getenv("PIMAIL_BENCH_MBOX")
	if path == "" {
		b.Skip("PIMAIL_BENCH_MBOX not set")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(b.TempDir(), testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	mb := ftsInbox(b, s)
	ctx := context.Background()
	var batch []store.AppendMessage
	n := 0
	flush := func() {
		if len(batch) > 0 {
			if _, err := s.AppendBatch(ctx, mb, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for _, m := range bytes.Split(data, []byte("\nFrom ")) {
		if i := bytes.IndexByte(m, '\n'); i >= 0 && i+1 < len(m) {
			batch = append(batch, store.AppendMessage{Raw: m[i+1:]})
			n++
			if len(batch) == 100 {
				flush()
			}
		}
	}
	flush()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	if err := s.WaitIndexed(wctx); err != nil {
		b.Fatal(err)
	}
	took := time.Since(t0).Round(time.Millisecond)
	// The indexer optimizes the index once it has caught up.
	for s.fts.optimized.Load() == 0 && wctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	for wctx.Err() == nil { // and checkpoints it
		if fi, err := os.Stat(filepath.Join(s.dir, "index.db-wal")); err != nil || fi.Size() == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	idx, mail, err := s.IndexSize(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// The indexer starts when the load ends (it steps aside for batches).
	b.Logf("%d messages indexed in %v after the load; index.db %.1f MB, %.0f %% of the mail",
		n, took, float64(idx)/1e6, 100*float64(idx)/float64(mail))
	words := []string{"aligned", "will"}
	if w := os.Getenv("PIMAIL_BENCH_WORDS"); w != "" {
		words = strings.Fields(w)
	}
	for _, w := range words {
		b.Run(w, func(b *testing.B) {
			n := 0
			for b.Loop() {
				res, err := s.Search(ctx, mb, store.SearchQuery{Op: store.SearchText, Text: w})
				if err != nil {
					b.Fatal(err)
				}
				n = len(res.UIDs)
			}
			b.ReportMetric(float64(n), "matches")
		})
	}
}
