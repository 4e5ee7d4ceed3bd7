package spam

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestJunkLearner(t *testing.T) {
	dir := t.TempDir()
	f, err := New(Config{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	trainSynthetic(t, f, BaseAccount)
	news := "weekly newsletter gardening tips roses tulips compost season"
	blobs := map[int64][]byte{}
	for i := int64(1); i <= 30; i++ {
		blobs[i] = synth(int(i), "newsletter", news)
	}
	var reads atomic.Int64
	read := func(_ context.Context, id int64) ([]byte, error) {
		reads.Add(1)
		if b, ok := blobs[id]; ok {
			return b, nil
		}
		return nil, errors.New("no such blob")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := NewJunkLearner(f, read, quiet())
	const acct = 7
	counts := func() (int, int) {
		m, err := f.Model(acct)
		if err != nil {
			t.Fatal(err)
		}
		return m.Counts()
	}

	// The user marks 30 newsletters as junk, some twice: each is trained once.
	for i := int64(1); i <= 30; i++ {
		l.Junk(acct, i, true)
		if i%3 == 0 {
			l.Junk(acct, i, true)
		}
	}
	l.Junk(acct, 999, true)      // unreadable: logged, not fatal
	l.Junk(BaseAccount, 1, true) // the base model is not for users
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s, h := counts(); s != 30 || h != 0 {
		t.Fatalf("after junk: %d spam %d ham", s, h)
	}
	r, _ := f.Check(ctx, Input{Raw: synth(100, "newsletter", news), Accounts: []int64{acct, 8}})
	if r.Accounts[acct].Action == Accept || r.Accounts[8].Action != Accept {
		t.Fatalf("account %d %+v, account 8 %+v", acct, r.Accounts[acct], r.Accounts[8])
	}

	// The user takes one back out of Junk: untrained as spam, trained as ham.
	l.Junk(acct, 5, false)
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s, h := counts(); s != 29 || h != 1 {
		t.Fatalf("after not-junk: %d spam %d ham", s, h)
	}
	if spam, ok, _ := l.Trained(acct, 5); !ok || spam {
		t.Fatalf("ledger for blob 5: spam=%v ok=%v", spam, ok)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"account-7.model", "account-7.trained"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}

	// A new process remembers: repeating old decisions changes nothing.
	f2, err := New(Config{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l2 := NewJunkLearner(f2, read, quiet())
	before := reads.Load()
	l2.Junk(acct, 5, false)
	l2.Junk(acct, 6, true)
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

func TestLedgerForgetsOldest(t *testing.T) {
	d := &ledger{trained: map[int64]bool{}}
	for i := int64(1); i <= 100; i++ {
		d.trained[i] = i%2 == 0
	}
	d.forgetOldest(10)
	if len(d.trained) != 10 || !d.trained[100] {
		t.Fatalf("kept %v", d.trained)
	}
	if _, ok := d.trained[90]; ok {
		t.Fatal("kept an old one")
	}
}
