package spam

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"pimail/internal/store"
)

// JunkLearner trains accounts' models from their users' junk decisions
// (a message moved into or out of Junk, flagged $Junk or $NotJunk). It
// implements imapd.JunkTrainer: Junk only queues, a single background
// worker reads the message, trains and saves, so IMAP commands never wait
// for the classifier or the store.
//
// Training is idempotent per account and message: the store's junk
// ledger (store.SpamModels) remembers which blobs were trained as what,
// and is written in the transaction that saves the model, so a repeat of
// the same decision is skipped, and the old class is untrained before the
// new one is trained when the user changes their mind, across restarts
// and nodes alike.
type JunkLearner struct {
	f     *Filter
	read  func(ctx context.Context, blobID int64) ([]byte, error)
	log   *slog.Logger
	queue chan junkJob
	done  chan struct{}
	stop  context.CancelFunc
	ctx   context.Context

	mu sync.Mutex
	// pending are the decisions trained since the last save: account →
	// blob → spam. Without a store they are the only ledger.
	pending map[int64]map[int64]bool
	dropped atomic.Int64 // not under mu: Junk must never wait for the worker
}

type junkJob struct {
	account, blob int64
	spam          bool
	flushed       chan struct{} // a Flush marker: closed when reached
}

// Bounds of the learner.
const (
	junkQueueLen = 1024 // decisions waiting; more are dropped (and logged)
	junkSaveIdle = 2 * time.Second
)

// NewJunkLearner starts the learner's worker. read returns a message's
// raw bytes by blob ID (store.BlobReader's ReadBlob). Close stops it.
func NewJunkLearner(f *Filter, read func(ctx context.Context, blobID int64) ([]byte, error), logger *slog.Logger) *JunkLearner {
	if logger == nil {
		logger = f.cfg.Logger
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &JunkLearner{f: f, read: read, log: logger, queue: make(chan junkJob, junkQueueLen),
		done: make(chan struct{}), stop: cancel, ctx: ctx, pending: map[int64]map[int64]bool{}}
	go l.run()
	return l
}

// Junk queues one decision: blobID of accountID is spam (true) or ham.
// It never blocks; when the queue is full the decision is dropped.
func (l *JunkLearner) Junk(accountID, blobID int64, spam bool) {
	if accountID == BaseAccount || blobID <= 0 {
		return
	}
	select {
	case l.queue <- junkJob{account: accountID, blob: blobID, spam: spam}:
	default:
		n := l.dropped.Add(1)
		if n == 1 || n%100 == 0 {
			l.log.Warn("junk training queue full; decisions dropped", "dropped", n)
		}
	}
}

// Close stops taking decisions, trains what is queued, and saves the
// models and the ledger.
func (l *JunkLearner) Close() error {
	close(l.queue)
	<-l.done
	l.stop()
	return l.save()
}

// Flush waits until what was queued before it is trained, then saves.
func (l *JunkLearner) Flush(ctx context.Context) error {
	mark := make(chan struct{})
	select {
	case l.queue <- junkJob{flushed: mark}:
	case <-ctx.Done():
		return fmt.Errorf("junk training flush: %w", ctx.Err())
	}
	select {
	case <-mark:
	case <-ctx.Done():
		return fmt.Errorf("junk training flush: %w", ctx.Err())
	}
	return l.save()
}

func (l *JunkLearner) run() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	pending := false
	for {
		select {
		case j, ok := <-l.queue:
			if !ok {
				return
			}
			if j.flushed != nil {
				close(j.flushed)
				continue
			}
			if err := l.learn(j); err != nil {
				l.log.Warn("junk training failed", "account", j.account, "blob", j.blob, "err", err)
			}
			if !pending {
				pending = true
				timer.Reset(junkSaveIdle)
			}
		case <-timer.C:
			pending = false
			if err := l.save(); err != nil {
				l.log.Warn("junk training: saving models failed", "err", err)
			}
		}
	}
}

// learn applies one decision.
func (l *JunkLearner) learn(j junkJob) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev, seen, err := l.trained(j.account, j.blob)
	if err != nil {
		return err
	}
	if seen && prev == j.spam {
		return nil // already trained this way
	}
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	raw, err := l.read(ctx, j.blob)
	cancel()
	if err != nil {
		return fmt.Errorf("read message: %w", err)
	}
	if seen {
		if err := l.f.Untrain(j.account, raw, prev); err != nil {
			return err
		}
	}
	if j.spam {
		err = l.f.TrainSpam(j.account, raw)
	} else {
		err = l.f.TrainHam(j.account, raw)
	}
	if err != nil {
		return err
	}
	p := l.pending[j.account]
	if p == nil {
		p = map[int64]bool{}
		l.pending[j.account] = p
	}
	p[j.blob] = j.spam
	return nil
}

// Trained reports how a blob was trained for an account: spam, and
// whether it was trained at all.
func (l *JunkLearner) Trained(accountID, blobID int64) (spam, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trained(accountID, blobID)
}

// trained looks a decision up in the unsaved ones, then in the store's
// ledger. Called with mu held.
func (l *JunkLearner) trained(account, blob int64) (spam, ok bool, err error) {
	if spam, ok := l.pending[account][blob]; ok {
		return spam, true, nil
	}
	st := l.f.cfg.Store
	if st == nil {
		return false, false, nil
	}
	ctx, cancel := context.WithTimeout(l.ctx, storeTimeout)
	defer cancel()
	spam, ok, err = st.JunkTrained(ctx, account, blob)
	if err != nil {
		return false, false, fmt.Errorf("junk ledger: %w", err)
	}
	return spam, ok, nil
}

// save writes the changed models, each with its account's new ledger
// entries in the same transaction: a crash never leaves a decision
// trained but not remembered, or remembered but not trained.
func (l *JunkLearner) save() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	trained := make(map[int64][]store.JunkTrained, len(l.pending))
	for account, p := range l.pending {
		for blob, spam := range p {
			trained[account] = append(trained[account], store.JunkTrained{BlobID: blob, Spam: spam})
		}
	}
	saved, err := l.f.models.save(trained)
	if l.f.cfg.Store != nil {
		for _, account := range saved {
			delete(l.pending, account)
		}
	}
	return err
}
