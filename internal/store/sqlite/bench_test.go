package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"pimail/internal/store"
)

// benchMsg is an 8 KB message, unique per n.
func benchMsg(n int64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: a@example.net\r\nTo: b@example.org\r\nSubject: bench %d\r\nMessage-ID: <bench%d@x>\r\n\r\n", n, n)
	line := bytes.Repeat([]byte("x"), 78)
	for b.Len() < 8192 {
		b.Write(line)
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// benchDeliver runs b.N deliveries from `workers` goroutines and reports
// how many deliveries shared each commit.
func benchDeliver(b *testing.B, workers int) {
	s, err := Open(b.TempDir(), testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		b.Fatal(err)
	}
	a, err := s.AddAccount(ctx, "u@example.org", "h")
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([][]byte, b.N)
	for i := range msgs {
		msgs[i] = benchMsg(int64(i))
	}
	b0, j0 := s.batches.Load(), s.batchJobs.Load()
	b.SetBytes(8192)
	b.ResetTimer()
	inParallel(b, workers, func(i int) error {
		_, err := s.Deliver(ctx, store.Delivery{Raw: msgs[i], Recipients: []store.Recipient{{AccountID: a.ID}}})
		return err
	})
	b.StopTimer()
	if n := s.batches.Load() - b0; n > 0 {
		b.ReportMetric(float64(s.batchJobs.Load()-j0)/float64(n), "deliveries/commit")
	}
}

// inParallel runs fn(i) for every i below b.N on `workers` goroutines; a
// worker stops at its first error, which fails the benchmark.
func inParallel(b *testing.B, workers int, fn func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkDeliver1(b *testing.B)  { benchDeliver(b, 1) }
func BenchmarkDeliver10(b *testing.B) { benchDeliver(b, 10) }
