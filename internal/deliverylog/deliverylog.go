// Package deliverylog records what happened to each message (accepted,
// filed into Junk, rejected, delivered, deferred, bounced) in the store's
// delivery log, for the web admin.
//
// Mail never waits for the log: Log puts the entry into a bounded buffer
// and returns at once; a background goroutine writes buffered entries in
// batches (one store write each, which shares the store's group commit):
// whenever 512 are waiting, and otherwise every 5 s. A store write changes
// a page of each of the log's tables and indexes however few entries it
// has: at a trickle of mail, writing each entry on its own was about a
// third of the WAL pages a message cost (docs/benchmarks.md).
// Readers that must see every entry so far (the web admin) call Flush
// first. When the buffer is full the entry is dropped and counted
// (pimail_delivery_log_dropped_total) rather than slowing SMTP down. The
// same goroutine deletes entries older than the retention period. A
// client's refusals beyond a burst a minute become one summary entry
// (flood.go).
//
// Callers log in one line, for example in smtpd at RCPT:
//
//	dlog.Log(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultRejected,
//		From: from, To: rcpt, RemoteIP: ip, Reason: "550 5.1.1 no such user"})
//
// A nil *Logger is valid and logs nothing, so packages need no checks.
package deliverylog

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"pimail/internal/metrics"
	"pimail/internal/store"
)

// Metrics of the delivery log.
var (
	droppedTotal = metrics.Default.NewCounter("pimail_delivery_log_dropped_total",
		"Delivery log entries dropped because the buffer was full or the write failed.")
	writtenTotal = metrics.Default.NewCounter("pimail_delivery_log_written_total",
		"Delivery log entries written to the store.")
)

// Store is what the logger needs of the store.
type Store interface {
	LogDelivery(ctx context.Context, entries []store.DeliveryLogEntry) error
	PruneDeliveryLog(ctx context.Context, before time.Time) (int64, error)
}

// Options tune a Logger; the zero value is a good default.
type Options struct {
	// Buffer is the number of entries waiting to be written before new
	// ones are dropped; 0 means 8192.
	Buffer int
	// MaxBatch is the largest number of entries in one store write; 0
	// means 512.
	MaxBatch int
	// FlushInterval is how long an entry may wait for others to share its
	// write; 0 means 5 s.
	FlushInterval time.Duration
	// Retention is how long entries are kept; 0 means 30 days, negative
	// keeps them for ever.
	Retention time.Duration
	// PruneInterval is how often old entries are deleted; 0 means 1 hour.
	PruneInterval time.Duration
	// FloodBurst is how many refusals of one client are logged one by one
	// in a FloodWindow; the rest become one summary entry (flood.go). 0
	// means 30, negative logs every refusal.
	FloodBurst int
	// FloodWindow is the window of FloodBurst; 0 means 1 minute.
	FloodWindow time.Duration
}

func (o *Options) setDefaults() {
	if o.Buffer <= 0 {
		o.Buffer = 8192
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 5 * time.Second
	}
	if o.Retention == 0 {
		o.Retention = 30 * 24 * time.Hour
	}
	if o.PruneInterval <= 0 {
		o.PruneInterval = time.Hour
	}
	if o.FloodBurst == 0 {
		o.FloodBurst = 30
	}
	if o.FloodWindow <= 0 {
		o.FloodWindow = time.Minute
	}
}

// Logger buffers entries and writes them in the background.
type Logger struct {
	st      Store
	log     *slog.Logger
	opts    Options
	ch      chan store.DeliveryLogEntry
	flood   *floodLimit
	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	closed  atomic.Bool
	dropped atomic.Uint64
	once    sync.Once
	now     func() time.Time
}

// New starts a Logger writing to st. Close it to write what is buffered.
func New(st Store, logger *slog.Logger, opts Options) *Logger {
	opts.setDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	l := &Logger{
		st:      st,
		log:     logger.With("component", "deliverylog"),
		opts:    opts,
		ch:      make(chan store.DeliveryLogEntry, opts.Buffer),
		flood:   newFloodLimit(opts.FloodBurst),
		flushes: make(chan chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		now:     time.Now,
	}
	go l.run()
	return l
}

// Log records e without blocking; a zero Time means now. On a nil Logger,
// after Close or with a full buffer it drops the entry (and counts it).
func (l *Logger) Log(e store.DeliveryLogEntry) {
	if l == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	if l.closed.Load() {
		l.drop(1)
		return
	}
	if !l.flood.admit(e) {
		return // counted for the window's summary
	}
	select {
	case l.ch <- e:
	default:
		l.drop(1)
	}
}

// Dropped returns the number of entries dropped so far.
func (l *Logger) Dropped() uint64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

func (l *Logger) drop(n int) {
	l.dropped.Add(uint64(n))
	droppedTotal.Add(uint64(n))
}

// Flush waits until every entry logged before the call is written (or
// ctx ends). Tests and shutdown use it.
func (l *Logger) Flush(ctx context.Context) error {
	if l == nil {
		return nil
	}
	ack := make(chan struct{})
	select {
	case l.flushes <- ack:
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is buffered and stops the logger; later entries are
// dropped. It is safe to call more than once.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.stop)
	})
	<-l.done
	return nil
}

func (l *Logger) run() {
	defer close(l.done)
	tick := time.NewTicker(l.opts.FlushInterval)
	defer tick.Stop()
	prune := time.NewTicker(l.opts.PruneInterval)
	defer prune.Stop()
	window := time.NewTicker(l.opts.FloodWindow)
	defer window.Stop()
	if l.opts.Retention > 0 {
		l.prune()
	}
	batch := make([]store.DeliveryLogEntry, 0, l.opts.MaxBatch)
	for {
		select {
		case e := <-l.ch:
			batch = append(batch, e)
			if len(batch) >= l.opts.MaxBatch {
				batch = l.write(batch)
			}
		case <-tick.C:
			batch = l.write(batch)
		case ack := <-l.flushes:
			batch = l.write(l.drain(batch))
			close(ack)
		case <-prune.C:
			if l.opts.Retention > 0 {
				l.prune()
			}
		case <-window.C:
			if batch = append(batch, l.flood.rollover(l.now(), l.opts.FloodWindow)...); len(batch) >= l.opts.MaxBatch {
				batch = l.write(batch)
			}
		case <-l.stop:
			batch = l.drain(batch)
			l.write(append(batch, l.flood.rollover(l.now(), l.opts.FloodWindow)...))
			return
		}
	}
}

// drain moves everything buffered now into batch, writing full batches.
func (l *Logger) drain(batch []store.DeliveryLogEntry) []store.DeliveryLogEntry {
	for range cap(l.ch) + 1 { // bounded: at most what the buffer holds
		select {
		case e := <-l.ch:
			batch = append(batch, e)
			if len(batch) >= l.opts.MaxBatch {
				batch = l.write(batch)
			}
		default:
			return batch
		}
	}
	return batch
}

// write stores batch and returns it emptied for reuse.
func (l *Logger) write(batch []store.DeliveryLogEntry) []store.DeliveryLogEntry {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.st.LogDelivery(ctx, batch); err != nil {
		l.drop(len(batch))
		l.log.Warn("writing the delivery log", "entries", len(batch), "err", err)
	} else {
		writtenTotal.Add(uint64(len(batch)))
	}
	clear(batch)
	return batch[:0]
}

func (l *Logger) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := l.st.PruneDeliveryLog(ctx, l.now().Add(-l.opts.Retention))
	if err != nil {
		l.log.Warn("pruning the delivery log", "err", err)
		return
	}
	if n > 0 {
		l.log.Info("delivery log pruned", "entries", n, "older_than", l.opts.Retention.String())
	}
}
