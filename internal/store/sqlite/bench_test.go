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
	var next atomic.Int64
	b0, j0 := s.batches.Load(), s.batchJobs.Load()
	b.SetBytes(8192)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if _, err := s.Deliver(ctx, store.Delivery{Raw: msgs[i], Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if n := s.batches.Load() - b0; n > 0 {
		b.ReportMetric(float64(s.batchJobs.Load()-j0)/float64(n), "deliveries/commit")
	}
}

func BenchmarkDeliver1(b *testing.B)  { benchDeliver(b, 1) }
func BenchmarkDeliver10(b *testing.B) { benchDeliver(b, 10) }
