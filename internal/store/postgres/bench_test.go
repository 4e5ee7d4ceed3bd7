package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pimail/internal/store"
)

// BenchmarkDeliverOneMailbox delivers 8 KB messages from 10 goroutines
// into one mailbox (SMTP ingest's shape) and reports msgs/s.
func BenchmarkDeliverOneMailbox(b *testing.B) {
	s := openTest(b)
	c := context.Background()
	if _, err := s.AddDomain(c, "example.org"); err != nil {
		b.Fatal(err)
	}
	a, err := s.AddAccount(c, "user@example.org", "hash")
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 8<<10)
	for i := range body {
		body[i] = "abcdefghij klmnopqrstuvwxyz\r\n"[i%29]
	}
	var n atomic.Int64
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				raw := append([]byte("Subject: m"+time.Now().String()+"\r\nMessage-ID: <"+string(rune('a'+i%26))+time.Now().String()+">\r\n\r\n"), body...)
				if _, err := s.Deliver(c, store.Delivery{Raw: raw, Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkAppendOne appends one message at a time (IMAP APPEND from one
// client) and reports msgs/s.
func BenchmarkAppendOne(b *testing.B) {
	s := openTest(b)
	c := context.Background()
	if _, err := s.AddDomain(c, "example.org"); err != nil {
		b.Fatal(err)
	}
	a, err := s.AddAccount(c, "user@example.org", "hash")
	if err != nil {
		b.Fatal(err)
	}
	inbox, _ := s.Mailbox(c, a.ID, "INBOX")
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Append(c, inbox.ID, testMessage(i), 0, nil, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
