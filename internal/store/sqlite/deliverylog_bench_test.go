package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pimail/internal/store"
)

// BenchmarkDeliveryLog: writing the log in the deliverylog package's
// batches of 512 entries, for events of 1 and 15 recipients (ns/op is per
// entry; KB/entry is the database's growth), and the administrator's
// searches on a log of 150,000 entries.
//
//	go test ./internal/store/sqlite -run XXX -bench DeliveryLog -benchtime 3x
func BenchmarkDeliveryLog(b *testing.B) {
	for _, rcpts := range []int{1, 15} {
		b.Run(fmt.Sprintf("log/rcpts=%d", rcpts), func(b *testing.B) {
			s := openTest(b)
			const n = 30_000
			for b.Loop() {
				fillLog(b, s, n, rcpts, time.Now())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
			b.ReportMetric(float64(dbPages(b, s)*4096)/1024/float64(b.N*n), "KB/entry")
		})
	}
	s := openTest(b)
	now := time.Now()
	fillLog(b, s, 150_000, 5, now)
	ctx := context.Background()
	for _, q := range []struct {
		name string
		q    store.DeliveryLogQuery
	}{
		{"search/newest", store.DeliveryLogQuery{}},
		{"search/recipient", store.DeliveryLogQuery{Text: "user7@bench.test"}},
		{"search/sender", store.DeliveryLogQuery{Text: "sender99@example.net"}},
		{"search/message-id", store.DeliveryLogQuery{Text: "<m12345@example.net>"}},
		{"search/ip", store.DeliveryLogQuery{Text: "192.0.2.77"}},
		{"search/rejected", store.DeliveryLogQuery{Result: store.ResultRejected}},
		{"search/hour-ago", store.DeliveryLogQuery{Until: now.Add(-time.Hour)}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.SearchDeliveryLog(ctx, q.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("counts/day", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.DeliveryLogCounts(ctx, now.Add(-24*time.Hour)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fillLog logs n entries: events of rcpts recipients, one every 100 ms of
// the two days before end, from 1,000 senders and 250 client addresses to
// 20 users, one event in ten refused at RCPT.
func fillLog(b *testing.B, s *Store, n, rcpts int, end time.Time) {
	ctx := context.Background()
	batch := make([]store.DeliveryLogEntry, 0, 512)
	for i := 0; i < n; {
		ev := i / rcpts
		e := store.DeliveryLogEntry{Time: end.Add(-time.Duration(n/rcpts-ev) * 100 * time.Millisecond),
			Direction: store.DirectionIn, From: fmt.Sprintf("sender%d@example.net", ev%1000),
			RemoteIP: fmt.Sprintf("192.0.2.%d", ev%250), Result: store.ResultAccepted, Reason: "250 2.0.0 ok"}
		if ev%10 == 0 {
			e.Result, e.Reason = store.ResultRejected, "550 5.1.1 no such user"
		} else {
			e.MessageID, e.Subject = fmt.Sprintf("m%d@example.net", ev), fmt.Sprintf("Report number %d for this week", ev)
		}
		for r := 0; r < rcpts && i < n; r, i = r+1, i+1 {
			e.To = fmt.Sprintf("user%d@bench.test", (ev+r)%20+1)
			batch = append(batch, e)
			if len(batch) == cap(batch) {
				if err := s.LogDelivery(ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if err := s.LogDelivery(ctx, batch); err != nil {
		b.Fatal(err)
	}
}

func dbPages(b *testing.B, s *Store) int64 {
	var n int64
	if err := s.rdb.QueryRow("SELECT count(*) FROM dbstat").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
