package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/testcorpus"
)

// fetchBenchMbox is the large corpus' 1k mailbox, or the mbox named by
// $FETCH_BENCH_MBOX; the benchmarks skip without it.
func fetchBenchMbox() string {
	if p := os.Getenv("FETCH_BENCH_MBOX"); p != "" {
		return p
	}
	dir, err := testcorpus.LargeDir()
	if err != nil {
		return err.Error()
	}
	return filepath.Join(dir, "mailbox", "mailbox-1k.mbox")
}

var fetchBenchEnv struct {
	sync.Once
	s    *Store
	mbox int64
	uids []uint32
	err  error
}

// fetchBenchStore returns a store (shared by the benchmarks of the
// process) whose INBOX holds fetchBenchMbox.
func fetchBenchStore(b *testing.B) (*Store, int64, []uint32) {
	b.Helper()
	raw, err := os.ReadFile(fetchBenchMbox())
	if err != nil {
		b.Skipf("benchmark mailbox not available: %v", err)
	}
	e := &fetchBenchEnv
	e.Do(func() {
		dir, err := os.MkdirTemp("", "fetch-bench")
		if err != nil {
			e.err = err
			return
		}
		s, err := Open(dir, testOptions())
		if err != nil {
			e.err = err
			return
		}
		ctx := context.Background()
		if _, err := s.AddDomain(ctx, "example.org"); err != nil {
			e.err = err
			return
		}
		a, err := s.AddAccount(ctx, "u@example.org", "h")
		if err != nil {
			e.err = err
			return
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		var mu sync.Mutex
		for _, m := range splitMboxCRLF(raw) {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				_, err := s.Deliver(ctx, store.Delivery{Raw: m, InternalDate: time.Now(),
					Recipients: []store.Recipient{{AccountID: a.ID}}})
				if err != nil {
					mu.Lock()
					e.err = err
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if e.err != nil {
			return
		}
		if err := s.WaitIndexed(ctx); err != nil {
			e.err = err
			return
		}
		mb, err := s.Mailbox(ctx, a.ID, "INBOX")
		if err != nil {
			e.err = err
			return
		}
		e.s, e.mbox = s, mb.ID
		metas, err := s.UIDs(ctx, e.mbox)
		if err != nil {
			e.err = err
			return
		}
		if len(metas) < 1000 {
			e.err = fmt.Errorf("%d messages in INBOX", len(metas))
			return
		}
		for _, m := range metas {
			e.uids = append(e.uids, m.UID)
		}
	})
	if e.err != nil {
		b.Fatal(e.err)
	}
	return e.s, e.mbox, e.uids
}

// splitMboxCRLF cuts an mbox into messages with CRLF line endings.
func splitMboxCRLF(b []byte) [][]byte {
	var out [][]byte
	for _, m := range bytes.Split(b, []byte("\nFrom ")) {
		if i := bytes.IndexByte(m, '\n'); i >= 0 {
			m = m[i+1:]
		}
		m = bytes.ReplaceAll(bytes.TrimRight(m, "\n"), []byte("\n"), []byte("\r\n"))
		if len(m) > 0 {
			out = append(out, append(m, '\r', '\n'))
		}
	}
	return out
}

// chunkSets splits uids into the UID sets of imapd's FETCH chunks.
func chunkSets(uids []uint32, n int) []store.UIDSet {
	var out []store.UIDSet
	for i := 0; i < len(uids); i += n {
		j := min(i+n, len(uids))
		out = append(out, store.UIDSet{{Start: uids[i], Stop: uids[j-1]}})
	}
	return out
}

// BenchmarkStoreFetchEnvelopes reads every message's envelope in imapd's
// chunks: the store's part of FETCH 1:* (... ENVELOPE).
func BenchmarkStoreFetchEnvelopes(b *testing.B) {
	benchStoreFetch(b, "envelopes", func(ctx context.Context, s *Store, mb int64, set store.UIDSet) (int, error) {
		metas, err := s.FetchEnvelopes(ctx, mb, set)
		return len(metas), err
	})
}

// BenchmarkStoreFetchHeaders: the store's part of FETCH 1:* (BODY.PEEK[HEADER]).
func BenchmarkStoreFetchHeaders(b *testing.B) {
	benchStoreFetch(b, "headers", func(ctx context.Context, s *Store, mb int64, set store.UIDSet) (int, error) {
		metas, _, err := s.FetchHeaders(ctx, mb, set)
		return len(metas), err
	})
}

// benchStoreFetch times fetch over the whole mailbox in chunks of 256
// UIDs, as the IMAP FETCH of 1:* asks the store, and reports CPU per
// message.
func benchStoreFetch(b *testing.B, what string, fetch func(context.Context, *Store, int64, store.UIDSet) (int, error)) {
	s, mb, uids := fetchBenchStore(b)
	ctx := context.Background()
	sets := chunkSets(uids, 256)
	b.ResetTimer()
	c0 := cpuNow()
	for range b.N {
		n := 0
		for _, set := range sets {
			got, err := fetch(ctx, s, mb, set)
			if err != nil {
				b.Fatal(err)
			}
			n += got
		}
		if n != len(uids) {
			b.Fatalf("%d %s, want %d", n, what, len(uids))
		}
	}
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N)/float64(len(uids)), "cpu-ns/msg")
}

// cpuNow is the process's user plus system CPU time in nanoseconds: less
// sensitive than wall time to other work on a shared machine.
func cpuNow() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkStoreUIDs lists the mailbox as SELECT does (UIDs), and
// BenchmarkStoreUIDsGeneral as it did before (Fetch without Parsed).
func BenchmarkStoreUIDs(b *testing.B)        { benchList(b, false) }
func BenchmarkStoreUIDsGeneral(b *testing.B) { benchList(b, true) }

func benchList(b *testing.B, general bool) {
	s, mb, uids := fetchBenchStore(b)
	ctx := context.Background()
	b.ResetTimer()
	c0 := cpuNow()
	for range b.N {
		var metas []store.MessageMeta
		var err error
		if general {
			metas, err = s.Fetch(ctx, mb, nil, store.FetchOptions{})
		} else {
			metas, err = s.UIDs(ctx, mb)
		}
		if err != nil || len(metas) != len(uids) {
			b.Fatalf("%d messages, %v", len(metas), err)
		}
	}
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N)/float64(len(uids)), "cpu-ns/msg")
}
