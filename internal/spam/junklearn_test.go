package spam

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestJunkLearner(t *testing.T) {
	st, ids := testStore(t, 2)
	acct, other := ids[0], ids[1]
	f, err := New(Config{Store: st, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	trainSynthetic(t, f, BaseAccount)
	news := "weekly newsletter gardening tips roses tulips compost season"
	var blobs []int64
	for i := range 30 {
		blobs = append(blobs, deliverBlob(t, st, acct, synth(i, "newsletter", news)))
	}
	var reads atomic.Int64
	read := func(ctx context.Context, id int64) ([]byte, error) {
		reads.Add(1)
		return st.ReadBlob(ctx, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := NewJunkLearner(f, read, quiet())
	counts := func() (int, int) {
		m, err := f.Model(acct)
		if err != nil {
			t.Fatal(err)
		}
		return m.Counts()
	}

	// The user marks 30 newsletters as junk, some twice: each is trained once.
	for i, b := range blobs {
		l.Junk(acct, b, true)
		if i%3 == 0 {
			l.Junk(acct, b, true)
		}
	}
	l.Junk(acct, 999999, true)   // unreadable: logged, not fatal
	l.Junk(BaseAccount, 1, true) // the base model is not for users
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s, h := counts(); s != 30 || h != 0 {
		t.Fatalf("after junk: %d spam %d ham", s, h)
	}
	r, _ := f.Check(ctx, Input{Raw: synth(100, "newsletter", news), Accounts: []int64{acct, other}})
	if r.Accounts[acct].Action == Accept || r.Accounts[other].Action != Accept {
		t.Fatalf("account %d %+v, account %d %+v", acct, r.Accounts[acct], other, r.Accounts[other])
	}
	// The ledger is the store's, written with the model.
	if spam, ok, err := st.JunkTrained(ctx, acct, blobs[4]); err != nil || !ok || !spam {
		t.Fatalf("store's ledger for a junked blob: spam=%v ok=%v %v", spam, ok, err)
	}

	// The user takes one back out of Junk: untrained as spam, trained as ham.
	l.Junk(acct, blobs[4], false)
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s, h := counts(); s != 29 || h != 1 {
		t.Fatalf("after not-junk: %d spam %d ham", s, h)
	}
	if spam, ok, _ := l.Trained(acct, blobs[4]); !ok || spam {
		t.Fatalf("ledger for blob %d: spam=%v ok=%v", blobs[4], spam, ok)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A new process (or node) remembers: repeating old decisions changes
	// nothing and reads no message.
	f2, err := New(Config{Store: st, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l2 := NewJunkLearner(f2, read, quiet())
	before := reads.Load()
	l2.Junk(acct, blobs[4], false)
	l2.Junk(acct, blobs[5], true)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	m, _ := f2.Model(acct)
	if s, h := m.Counts(); s != 29 || h != 1 || reads.Load() != before {
		t.Fatalf("after restart: %d spam %d ham, %d reads", s, h, reads.Load()-before)
	}
}

func TestJunkLearnerNeverBlocks(t *testing.T) {
	f, _ := New(Config{Logger: quiet()})
	block := make(chan struct{})
	l := NewJunkLearner(f, func(context.Context, int64) ([]byte, error) {
		<-block
		return synth(1, "x", "y"), nil
	}, quiet())
	done := make(chan struct{})
	go func() {
		for i := range junkQueueLen * 2 {
			l.Junk(1, int64(i+1), true)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Junk blocked on a full queue")
	}
	close(block)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
