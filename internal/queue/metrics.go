package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"pimail/internal/metrics"
)

// The queue's metrics, in the server's registry (internal/metrics):
//   - pimail_queue_messages (metrics.QueueSize): entries in the queue,
//     counted from the store at a scrape (at most every sizeMaxAge), so
//     that changes by `pimail queue drop` in another process show too;
//   - pimail_queue_attempts_total{result} (metrics.QueueAttempts): per
//     recipient and attempt, "delivered", "deferred" (will be retried) or
//     "failed" (bounced: permanent refusal or too old);
//   - pimail_queue_notices_total{action}: delivery status notifications
//     made for senders, "failed" (bounces) or "delayed".
var queueNotices = metrics.Default.NewCounterVec("pimail_queue_notices_total",
	"Delivery status notifications made for senders, by action (failed, delayed).", "action")

// sizeMaxAge bounds how often a scrape counts the queue's entries.
const sizeMaxAge = 10 * time.Second

var (
	// watched is the queue whose size the gauge shows: the last started.
	watched     atomic.Pointer[Queue]
	watchOnce   sync.Once
	sizeMu      sync.Mutex
	sizeCounted time.Time
)

// watchSize makes metrics.QueueSize follow q.
func (q *Queue) watchSize() {
	watched.Store(q)
	watchOnce.Do(func() { metrics.Default.OnCollect(collectSize) })
}

func collectSize() {
	q := watched.Load()
	if q == nil {
		return
	}
	sizeMu.Lock()
	defer sizeMu.Unlock()
	if time.Since(sizeCounted) < sizeMaxAge {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entries, err := q.st.QueueEntries(ctx)
	if err != nil {
		return // keep the last value
	}
	sizeCounted = time.Now()
	metrics.QueueSize.Set(float64(len(entries)))
}

// countAttempt counts one recipient's attempt by its result.
func countAttempt(result string) { metrics.QueueAttempts.With(result).Inc() }
