package queue

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"pimail/internal/metrics"
)

// The queue's counters follow the outcome of each recipient's attempts,
// the notice counter the bounces made, and the size gauge, at a scrape,
// the entries still queued.
func TestQueueMetrics(t *testing.T) {
	mx := startMX(t, false)
	mx.rcptErr = func(_ int, to string) error {
		switch {
		case strings.HasPrefix(to, "gone@"):
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		case strings.HasPrefix(to, "later@"):
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
		}
		return nil
	}
	cfg := testConfig()
	cfg.Transports["remote.example"] = Transport{Host: mx.addr}
	e := newEnv(t, cfg)
	count := func(result string) uint64 { return metrics.QueueAttempts.With(result).Value() }
	delivered, deferred, failed := count(metrics.ResultDelivered), count(metrics.ResultDeferred), count(metrics.ResultFailed)
	notices := queueNotices.With(actionFailed).Value()

	ctx := context.Background()
	if _, err := e.q.Enqueue(ctx, 1, "alice@example.org", []string{"ok@remote.example", "gone@remote.example", "later@remote.example"}, []byte(outMsg)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two deferrals", func() bool { return count(metrics.ResultDeferred)-deferred >= 2 })
	if d := count(metrics.ResultDelivered) - delivered; d != 1 {
		t.Errorf("delivered counter +%d, want +1", d)
	}
	if f := count(metrics.ResultFailed) - failed; f != 1 {
		t.Errorf("failed counter +%d, want +1", f)
	}
	if n := queueNotices.With(actionFailed).Value() - notices; n != 1 {
		t.Errorf("failed-notice counter +%d, want +1", n)
	}

	sizeMu.Lock()
	sizeCounted = time.Time{}
	sizeMu.Unlock()
	if err := metrics.Default.WriteText(io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := metrics.QueueSize.Value(); got != 1 {
		t.Errorf("queue size gauge %v, want 1 (the deferred recipient's entry)", got)
	}
}
