package spam

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// JunkLearner trains accounts' models from their users' junk decisions
// (a message moved into or out of Junk, flagged $Junk or $NotJunk). It
// implements imapd.JunkTrainer: Junk only queues, a single background
// worker reads the message, trains and saves, so IMAP commands never wait
// for the classifier or the disk.
//
// Training is idempotent per account and message: the learner remembers
// which blobs it trained as what (DIR/account-<id>.trained), skips a
// repeat of the same decision, and untrains the old class before training
// the new one when the user changes their mind.
type JunkLearner struct {
	f     *Filter
	read  func(ctx context.Context, blobID int64) ([]byte, error)
	log   *slog.Logger
	queue chan junkJob
	done  chan struct{}
	stop  context.CancelFunc
	ctx   context.Context

	mu      sync.Mutex
	ledgers map[int64]*ledger
	dropped atomic.Int64 // not under mu: Junk must never wait for the worker
}

type junkJob struct {
	account, blob int64
	spam          bool
	flushed       chan struct{} // a Flush marker: closed when reached
}

// Bounds of the learner.
const (
	junkQueueLen = 1024   // decisions waiting; more are dropped (and logged)
	maxLedger    = 100000 // remembered decisions per account; the oldest blobs are forgotten
	junkSaveIdle = 2 * time.Second
)

// ledger is one account's record of trained blobs: true spam, false ham.
type ledger struct {
	trained map[int64]bool
	dirty   bool
}

// NewJunkLearner starts the learner's worker. read returns a message's
// raw bytes by blob ID (store.Store's ReadBlob). Close stops it.
func NewJunkLearner(f *Filter, read func(ctx context.Context, blobID int64) ([]byte, error), logger *slog.Logger) *JunkLearner {
	if logger == nil {
		logger = f.cfg.Logger
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &JunkLearner{f: f, read: read, log: logger, queue: make(chan junkJob, junkQueueLen),
		done: make(chan struct{}), stop: cancel, ctx: ctx, ledgers: map[int64]*ledger{}}
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
// models and ledgers.
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
	led, err := l.ledger(j.account)
	if err != nil {
		return err
	}
	prev, seen := led.trained[j.blob]
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
	led.trained[j.blob] = j.spam
	led.dirty = true
	if len(led.trained) > maxLedger {
		led.forgetOldest(maxLedger * 9 / 10)
	}
	return nil
}

// Trained reports how a blob was trained for an account: spam, and
// whether it was trained at all.
func (l *JunkLearner) Trained(accountID, blobID int64) (spam, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	led, err := l.ledger(accountID)
	if err != nil {
		return false, false, err
	}
	spam, ok = led.trained[blobID]
	return spam, ok, nil
}

// forgetOldest keeps the n highest blob IDs (blob IDs grow with time).
func (d *ledger) forgetOldest(n int) {
	ids := make([]int64, 0, len(d.trained))
	for id := range d.trained {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids[:len(ids)-n] {
		delete(d.trained, id)
	}
}

func (l *JunkLearner) ledgerPath(account int64) string {
	if l.f.cfg.Dir == "" {
		return ""
	}
	return filepath.Join(l.f.cfg.Dir, "account-"+strconv.FormatInt(account, 10)+".trained")
}

// ledger returns an account's ledger, reading its file on first use.
// Called with mu held.
func (l *JunkLearner) ledger(account int64) (*ledger, error) {
	if d, ok := l.ledgers[account]; ok {
		return d, nil
	}
	d := &ledger{trained: map[int64]bool{}}
	if p := l.ledgerPath(account); p != "" {
		if err := d.load(p); err != nil {
			return nil, err
		}
	}
	l.ledgers[account] = d
	return d, nil
}

// Ledger file: one line per blob, "<blob id> s" or "<blob id> h".
func (d *ledger) load(path string) error {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read junk ledger: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for n := 0; sc.Scan() && n < 2*maxLedger; n++ {
		id, class, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseInt(id, 10, 64)
		if !ok || err != nil || (class != "s" && class != "h") {
			continue // a damaged line forgets one decision, nothing worse
		}
		d.trained[v] = class == "s"
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read junk ledger %s: %w", path, err)
	}
	return nil
}

// save writes the models (Filter.Save) and then the changed ledgers. A
// crash between the two can at worst train one message twice, never lose
// the model.
func (l *JunkLearner) save() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs := []error{l.f.Save()}
	for account, d := range l.ledgers {
		p := l.ledgerPath(account)
		if !d.dirty || p == "" {
			continue
		}
		if err := d.write(p); err != nil {
			errs = append(errs, err)
			continue
		}
		d.dirty = false
	}
	return errors.Join(errs...)
}

func (d *ledger) write(path string) error {
	var b strings.Builder
	ids := make([]int64, 0, len(d.trained))
	for id := range d.trained {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		class := "h"
		if d.trained[id] {
			class = "s"
		}
		b.WriteString(strconv.FormatInt(id, 10) + " " + class + "\n")
	}
	if err := writeAtomic(path, []byte(b.String())); err != nil {
		return fmt.Errorf("write junk ledger: %w", err)
	}
	return nil
}

// writeAtomic writes a file through a temporary one and a rename.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".ledger-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
