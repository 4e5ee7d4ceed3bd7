package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

func waitIndexed(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitIndexed(ctx); err != nil {
		t.Fatalf("WaitIndexed: %v", err)
	}
}

func bodySearch(t *testing.T, s *Store, mb int64, word string) []uint32 {
	t.Helper()
	res, err := s.Search(context.Background(), mb, store.SearchQuery{Op: store.SearchBody, Text: word})
	if err != nil {
		t.Fatalf("Search %q: %v", word, err)
	}
	return res.UIDs
}

func wordMsg(word string) []byte {
	return []byte("From: a@example.org\r\nSubject: s\r\n\r\nThe word is " + word + ".\r\n")
}

func ftsInbox(t testing.TB, s *Store) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	a, err := s.AddAccount(ctx, "u@example.org", "x")
	if err != nil {
		t.Fatal(err)
	}
	mb, err := s.Mailbox(ctx, a.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	return mb.ID
}

// TestIndexRebuiltWhenCorrupt: a garbage index.db is set aside and the
// index rebuilt in the background; searches are right throughout.
func TestIndexRebuiltWhenCorrupt(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	mb := ftsInbox(t, s)
	for i := range 5 {
		if _, err := s.Append(context.Background(), mb, wordMsg(fmt.Sprintf("zebra%d", i)), 0, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	waitIndexed(t, s)
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, "index.db"), []byte("this is not a database, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "index.db-wal"))
	s, err = Open(dir, testOptions())
	if err != nil {
		t.Fatalf("reopen with a corrupt index: %v", err)
	}
	defer s.Close()
	if got := bodySearch(t, s, mb, "zebra3"); !slices.Equal(got, []uint32{4}) {
		t.Errorf("before the rebuild: %v", got)
	}
	waitIndexed(t, s)
	if got := bodySearch(t, s, mb, "zebra3"); !slices.Equal(got, []uint32{4}) {
		t.Errorf("after the rebuild: %v", got)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "index.db.broken-*"))
	if len(aside) != 1 {
		t.Errorf("corrupt index not set aside: %v", aside)
	}
	var rows int
	if err := s.fts.db.Load().QueryRow("SELECT count(*) FROM fts").Scan(&rows); err != nil || rows != 5 {
		t.Errorf("rebuilt index has %d rows (%v), want 5", rows, err)
	}
}

// TestIndexCollectedAndReusedID: a collected blob's row is removed, and
// when SQLite hands its id to a new blob the old text never matches.
func TestIndexCollectedAndReusedID(t *testing.T) {
	s := openTest(t)
	mb := ftsInbox(t, s)
	ctx := context.Background()
	if _, err := s.Append(ctx, mb, wordMsg("keepsake"), 0, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Append(ctx, mb, wordMsg("ephemeral"), store.FlagDeleted, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, s)
	metas, err := s.Fetch(ctx, mb, store.UIDSet{{Start: d.UID, Stop: d.UID}}, store.FetchOptions{})
	if err != nil || len(metas) != 1 {
		t.Fatalf("Fetch: %v %v", metas, err)
	}
	oldBlob := metas[0].BlobID
	if _, err := s.Expunge(ctx, mb, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.collectOnce(); err != nil {
		t.Fatal(err)
	}
	if h := s.fts.hwm.Load(); h >= oldBlob {
		t.Errorf("hwm %d not lowered below the collected top blob %d", h, oldBlob)
	}
	d2, err := s.Append(ctx, mb, wordMsg("newcomer"), 0, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	metas, err = s.Fetch(ctx, mb, store.UIDSet{{Start: d2.UID, Stop: d2.UID}}, store.FetchOptions{})
	if err != nil || len(metas) != 1 {
		t.Fatalf("Fetch: %v %v", metas, err)
	}
	if metas[0].BlobID != oldBlob {
		t.Logf("SQLite did not reuse blob id %d (got %d); the test still checks the results", oldBlob, metas[0].BlobID)
	}
	for phase := range 2 {
		if got := bodySearch(t, s, mb, "ephemeral"); len(got) != 0 {
			t.Errorf("phase %d: collected text still matches: %v", phase, got)
		}
		if got := bodySearch(t, s, mb, "newcomer"); !slices.Equal(got, []uint32{d2.UID}) {
			t.Errorf("phase %d: new message: %v", phase, got)
		}
		if got := bodySearch(t, s, mb, "keepsake"); !slices.Equal(got, []uint32{1}) {
			t.Errorf("phase %d: old message: %v", phase, got)
		}
		waitIndexed(t, s)
	}
	var rows int
	if err := s.fts.db.Load().QueryRow("SELECT count(*) FROM fts").Scan(&rows); err != nil || rows != 2 {
		t.Errorf("index has %d rows (%v), want 2", rows, err)
	}
}

// TestIndexVocabularyRows: the vocabulary spans several rows, survives a
// reopen (new words go on after the last row), and every word is found
// from the index alone, whichever row holds it.
func TestIndexVocabularyRows(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	mb := ftsInbox(t, s)
	ctx := context.Background()
	// 12,000 distinct words of 8 bytes fill more than one row.
	var body []byte
	for i := range 12000 {
		body = fmt.Appendf(body, "vw%06d ", i)
		if i%8 == 7 {
			body = append(body, "\r\n"...)
		}
	}
	msg := append([]byte("From: a@example.org\r\nSubject: many words\r\n\r\n"), body...)
	if _, err := s.Append(ctx, mb, msg, 0, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, s)
	var rows int
	if err := s.fts.db.Load().QueryRow("SELECT count(*) FROM vocab").Scan(&rows); err != nil || rows < 2 {
		t.Fatalf("vocabulary in %d rows (%v), want several", rows, err)
	}
	// Searches cache the full rows; the indexer goes on writing the last
	// one and starts another.
	if got := bodySearch(t, s, mb, "vw011998"); !slices.Equal(got, []uint32{1}) {
		t.Errorf("first search: %v", got)
	}
	body = body[:0]
	for i := range 9000 {
		body = fmt.Appendf(body, "xw%06d\r\n", i)
	}
	if _, err := s.Append(ctx, mb, append([]byte("From: a@example.org\r\nSubject: more\r\n\r\n"), body...), 0, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, s)
	for _, w := range []string{"xw000000", "xw008999", "vw011998", "vw000001"} {
		if got := bodySearch(t, s, mb, w); len(got) != 1 {
			t.Errorf("%q after more words: %v", w, got)
		}
	}
	s.Close()
	s, err = Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(ctx, mb, wordMsg("afterreopen vw011999"), 0, nil, time.Time{}); err != nil { // UID 3
		t.Fatal(err)
	}
	waitIndexed(t, s)
	for _, c := range []struct {
		needle string
		want   []uint32
	}{
		{"vw000000", []uint32{1}},
		{"vw011999", []uint32{1, 3}},
		{"w0119", []uint32{1, 3}}, // inside words
		{"vw0060", []uint32{1}},   // ten words in the middle
		{"xw00899", []uint32{2}},
		{"afterreopen", []uint32{3}},
		{"terreo", []uint32{3}},
		{"vw012000", nil},
		{"vw", []uint32{1, 3}},   // in 12,001 words: 25 queries
		{"w", []uint32{1, 2, 3}}, // every message after a few queries
		{"6", []uint32{1, 2}},
	} {
		if got := bodySearch(t, s, mb, c.needle); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.needle, got, c.want)
		}
	}
	var words, inRows int
	db := s.fts.db.Load()
	if err := db.QueryRow("SELECT count(*) FROM words").Scan(&words); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT sum(length(data) - length(replace(data, x'0a', x''))) FROM vocab").Scan(&inRows); err != nil {
		t.Fatal(err)
	}
	if words != inRows {
		t.Errorf("%d words but %d in the vocabulary rows", words, inRows)
	}
}

// TestIndexOptimized: after a load the indexer merges the index into one
// segment; searches are right before and after.
func TestIndexOptimized(t *testing.T) {
	old := indexOptimizeMin
	indexOptimizeMin = 20
	defer func() { indexOptimizeMin = old }()
	s := openTest(t)
	mb := ftsInbox(t, s)
	ctx := context.Background()
	var msgs []store.AppendMessage
	for i := range 30 {
		msgs = append(msgs, store.AppendMessage{Raw: wordMsg(fmt.Sprintf("heron%02d", i))})
	}
	if _, err := s.AppendBatch(ctx, mb, msgs); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, s)
	deadline := time.Now().Add(10 * time.Second)
	for s.fts.optimized.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if s.fts.optimized.Load() == 0 {
		t.Fatal("index not optimized after 30 new blobs")
	}
	if got := bodySearch(t, s, mb, "heron1"); len(got) != 10 {
		t.Errorf("heron1: %v", got)
	}
	if got := bodySearch(t, s, mb, "ron29"); !slices.Equal(got, []uint32{30}) {
		t.Errorf("ron29: %v", got)
	}
}

// TestIndexOldLayoutReplaced: an index.db of the trigram layout is dropped
// and rebuilt in the new one.
func TestIndexOldLayoutReplaced(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	mb := ftsInbox(t, s)
	if _, err := s.Append(context.Background(), mb, wordMsg("pelican"), 0, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, s)
	db := s.fts.db.Load()
	if _, err := db.Exec(`DROP TABLE fts; DROP TABLE words; DROP TABLE vocab;
		CREATE VIRTUAL TABLE fts USING fts5(terms, content='', contentless_delete=1, tokenize='ascii', detail=none);
		UPDATE meta SET value = 'fts5 byte-trigram terms ascii detail=none v2' WHERE key = 'layout'`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitIndexed(t, s)
	if got := bodySearch(t, s, mb, "elica"); !slices.Equal(got, []uint32{1}) {
		t.Errorf("after the rebuild: %v", got)
	}
	var layout string
	if err := s.fts.db.Load().QueryRow("SELECT value FROM meta WHERE key = 'layout'").Scan(&layout); err != nil || layout != ftsLayout {
		t.Errorf("layout %q (%v)", layout, err)
	}
}

// TestIndexWALFold: once caught up, the indexer folds index.db-wal into
// index.db when the WAL has reached indexWALFold, and leaves a smaller one
// (a trickle's batches) for a later checkpoint.
func TestIndexWALFold(t *testing.T) {
	walSize := func(s *Store) int64 {
		fi, err := os.Stat(filepath.Join(s.dir, "index.db-wal"))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	old := indexWALFold
	t.Cleanup(func() { indexWALFold = old })
	for _, fold := range []int64{1, 1 << 40} {
		t.Run(fmt.Sprintf("fold=%d", fold), func(t *testing.T) {
			indexWALFold = fold // the previous subtest's store is closed
			s := openTest(t)
			mb := ftsInbox(t, s)
			if _, err := s.Append(context.Background(), mb, wordMsg("walrus"), 0, nil, time.Time{}); err != nil {
				t.Fatal(err)
			}
			waitIndexed(t, s)
			deadline := time.Now().Add(10 * time.Second)
			for fold == 1 && walSize(s) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if fold > 1 {
				time.Sleep(time.Second) // the indexer's catch-up has passed
			}
			if got := walSize(s); (fold == 1) != (got == 0) {
				t.Errorf("index.db-wal has %d bytes", got)
			}
			if got := bodySearch(t, s, mb, "walrus"); len(got) != 1 {
				t.Errorf("search = %v", got)
			}
		})
	}
}

// TestWordSetTerms checks a blob's distinct words against a map, for
// texts with repeats and with more words than the set's first table, one
// set reused from text to text as the indexer does.
func TestWordSetTerms(t *testing.T) {
	var w wordSet
	for n, text := range []string{
		"the cat and the hat, THE Cat; ütf ütf 42 42x",
		strings.Repeat("alpha beta ", 50) + func() string {
			var b strings.Builder
			for i := range 5000 {
				fmt.Fprintf(&b, "w%d w%d ", i, i/2)
			}
			return b.String()
		}(),
		"",
		"one",
	} {
		batch := map[string]struct{}{}
		var want []string
		seen := map[string]bool{}
		eachWord(text, func(word string) {
			if !seen[word] {
				seen[word] = true
				want = append(want, word)
			}
		})
		got := strings.Fields(w.terms(text, batch))
		if !slices.Equal(got, want) {
			t.Fatalf("text %d: %d words, want %d (first %q)", n, len(got), len(want), got[:min(len(got), 5)])
		}
		if len(batch) != len(want) {
			t.Fatalf("text %d: batch holds %d words, want %d", n, len(batch), len(want))
		}
	}
}
