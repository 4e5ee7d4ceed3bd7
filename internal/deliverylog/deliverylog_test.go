package deliverylog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestWritesAndPrunes(t *testing.T) {
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old := store.DeliveryLogEntry{Time: time.Now().Add(-40 * 24 * time.Hour), Direction: store.DirectionIn, Result: store.ResultAccepted}
	if err := st.LogDelivery(ctx(t), []store.DeliveryLogEntry{old}); err != nil {
		t.Fatal(err)
	}
	l := New(st, quiet(), Options{FlushInterval: time.Hour}) // only Flush writes
	for i := range 1000 {
		l.Log(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultRejected, To: "a@example.org", QueueID: int64(i + 1)})
	}
	if err := l.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	got, err := st.SearchDeliveryLog(ctx(t), store.DeliveryLogQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// 1000 new ones; the 40-day-old entry was pruned when the logger started.
	if len(got) != 1000 || l.Dropped() != 0 {
		t.Fatalf("%d entries, %d dropped; want 1000, 0", len(got), l.Dropped())
	}
	if got[0].Time.IsZero() || time.Since(got[0].Time) > time.Minute {
		t.Fatalf("time not set: %v", got[0].Time)
	}
	l.Log(store.DeliveryLogEntry{Direction: store.DirectionOut, Result: store.ResultDelivered})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ = st.SearchDeliveryLog(ctx(t), store.DeliveryLogQuery{Result: store.ResultDelivered})
	if len(got) != 1 {
		t.Fatalf("entry logged before Close not written: %d", len(got))
	}
	l.Log(store.DeliveryLogEntry{Direction: store.DirectionOut, Result: store.ResultDelivered})
	if l.Dropped() != 1 {
		t.Fatalf("entry after Close: dropped = %d, want 1", l.Dropped())
	}
	l.Close() // twice is fine
}

// blockingStore holds every write until released.
type blockingStore struct {
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (b *blockingStore) LogDelivery(ctx context.Context, e []store.DeliveryLogEntry) error {
	<-b.release
	b.mu.Lock()
	b.n += len(e)
	b.mu.Unlock()
	return nil
}

func (b *blockingStore) PruneDeliveryLog(context.Context, time.Time) (int64, error) { return 0, nil }

func TestFullBufferDropsWithoutBlocking(t *testing.T) {
	bs := &blockingStore{release: make(chan struct{})}
	l := New(bs, quiet(), Options{Buffer: 10, MaxBatch: 5, FlushInterval: time.Millisecond, Retention: -1})
	start := time.Now()
	for range 200 {
		l.Log(store.DeliveryLogEntry{Result: store.ResultAccepted})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Log blocked for %v", d)
	}
	// At most Buffer entries wait, plus what the writer took (one batch).
	if l.Dropped() < 200-10-5 {
		t.Fatalf("dropped %d of 200 with a buffer of 10", l.Dropped())
	}
	close(bs.release)
	l.Close()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if uint64(bs.n)+l.Dropped() != 200 {
		t.Fatalf("written %d + dropped %d != 200", bs.n, l.Dropped())
	}
}

func TestNilLogger(t *testing.T) {
	var l *Logger
	l.Log(store.DeliveryLogEntry{})
	if l.Dropped() != 0 || l.Flush(context.Background()) != nil || l.Close() != nil {
		t.Fatal("nil logger misbehaves")
	}
}

func TestHelpers(t *testing.T) {
	id, subj := Identify([]byte("Received: x\r\nMessage-ID: <abc@example.net>\r\nSubject: =?utf-8?q?Gr=C3=BC=C3=9Fe?= <b>\r\n\r\nbody"))
	if id != "abc@example.net" || subj != "Grüße <b>" {
		t.Fatalf("Identify = %q, %q", id, subj)
	}
	if id, subj := Identify([]byte("garbage without header end")); id != "" || subj != "" {
		t.Fatalf("Identify(garbage) = %q, %q", id, subj)
	}
	err := fmt.Errorf("wrapped: %w", &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"})
	if got := Reply(err); got != "550 5.1.1 no such user" {
		t.Fatalf("Reply = %q", got)
	}
	if Reply(nil) != "" || Reply(errors.New("x")) != "x" {
		t.Fatal("Reply of nil or plain error")
	}
	var got []string
	st := &recordStore{}
	l := New(st, quiet(), Options{Retention: -1})
	clock := time.Unix(1e9, 0)
	l.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	l.LogEach(store.DeliveryLogEntry{Result: store.ResultAccepted}, []string{"a@x", "b@x"})
	l.Close()
	for _, e := range st.entries {
		got = append(got, e.To)
	}
	if strings.Join(got, ",") != "a@x,b@x" {
		t.Fatalf("LogEach wrote %v", got)
	}
	if t0, t1 := st.entries[0].Time, st.entries[1].Time; t0.IsZero() || !t0.Equal(t1) {
		t.Fatalf("LogEach times %v, %v; want one time", t0, t1)
	}
}

type recordStore struct{ entries []store.DeliveryLogEntry }

func (r *recordStore) LogDelivery(_ context.Context, e []store.DeliveryLogEntry) error {
	r.entries = append(r.entries, e...)
	return nil
}

func (r *recordStore) PruneDeliveryLog(context.Context, time.Time) (int64, error) { return 0, nil }
