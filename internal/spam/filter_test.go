package spam

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/testcorpus"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func synth(i int, subject, body string) []byte {
	return []byte(fmt.Sprintf("Received: from x by y; Mon, 2 Jan 2006 15:04:05 +0000\r\nFrom: s%d@sender%d.test\r\nTo: r@example.com\r\n"+
		"Subject: %s %d\r\nDate: Mon, 2 Jan 2006 15:00:00 +0000\r\nMessage-ID: <%d@sender.test>\r\n\r\n%s\r\n", i, i%7, subject, i, i, body))
}

var (
	spamBody = "cheap pills online pharmacy discount viagra order now limited offer"
	hamBody  = "the quarterly report meeting agenda attached please review before thursday"
)

// trainSynthetic gives a model MinTrained+ messages of each class.
func trainSynthetic(t *testing.T, f *Filter, acct int64) {
	t.Helper()
	for i := 0; i < MinTrained+5; i++ {
		if err := f.TrainSpam(acct, synth(i, "offer", spamBody)); err != nil {
			t.Fatal(err)
		}
		if err := f.TrainHam(acct, synth(i, "meeting", hamBody)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFilterVerdicts(t *testing.T) {
	f, err := New(Config{Logger: quiet(), NoShippedModel: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Untrained (and without the shipped model): the classifier stays out.
	r, err := f.Check(ctx, Input{Raw: synth(1, "offer", spamBody), Accounts: []int64{1}})
	if err != nil || r.Message.Bayes != -1 || r.Message.Action != Accept {
		t.Fatalf("untrained: %+v %v", r.Message, err)
	}
	trainSynthetic(t, f, BaseAccount)
	r, _ = f.Check(ctx, Input{Raw: synth(99, "offer", spamBody), Accounts: []int64{1}})
	if r.Message.Bayes < 0.9 || r.Message.Action == Accept || r.Message.Hits[0].Name[:6] != "BAYES_" {
		t.Fatalf("spam: %+v", r.Message)
	}
	r, _ = f.Check(ctx, Input{Raw: synth(99, "meeting", hamBody), Accounts: []int64{1}})
	if r.Message.Bayes > 0.1 || r.Message.Action != Accept || r.Message.Score > 0 {
		t.Fatalf("ham: %+v", r.Message)
	}
	// Rejection needs the reject threshold; NoReject files instead.
	strict, _ := New(Config{Logger: quiet(), RejectThreshold: 6, NoShippedModel: true})
	trainSynthetic(t, strict, BaseAccount)
	r, _ = strict.Check(ctx, Input{Raw: synth(99, "offer", spamBody), Accounts: []int64{1, 2}})
	if !r.Rejected || r.Accounts[1].Action != Reject {
		t.Fatalf("reject: %+v", r)
	}
	noRej, _ := New(Config{Logger: quiet(), RejectThreshold: 6, NoReject: true, NoShippedModel: true})
	trainSynthetic(t, noRej, BaseAccount)
	r, _ = noRej.Check(ctx, Input{Raw: synth(99, "offer", spamBody), Accounts: []int64{1}})
	if r.Rejected || r.Message.Action != Junk {
		t.Fatalf("NoReject: %+v", r.Message)
	}
}

// An account's own training adjusts the shared base model for that
// account only.
func TestPerAccountModel(t *testing.T) {
	st, ids := testStore(t, 2)
	a7, a8 := ids[0], ids[1]
	f, err := New(Config{Store: st, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	trainSynthetic(t, f, BaseAccount)
	// Account a7 considers newsletters spam; the base has never seen them.
	news := "weekly newsletter gardening tips roses tulips compost season"
	for i := 0; i < 30; i++ {
		if err := f.TrainSpam(a7, synth(i, "newsletter", news)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	r, err := f.Check(ctx, Input{Raw: synth(100, "newsletter", news), Accounts: []int64{a7, a8}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Accounts[a7].Action == Accept || r.Accounts[a8].Action != Accept {
		t.Fatalf("account a7 %+v, account a8 %+v", r.Accounts[a7], r.Accounts[a8])
	}
	if r.Rejected {
		t.Fatal("rejected although one recipient accepts")
	}
	// Stored and loaded again.
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{BaseAccount, a7} {
		if v, err := st.SpamModelVersion(ctx, id); err != nil || v == 0 {
			t.Fatalf("model of %d not stored: %v", id, err)
		}
	}
	g, err := New(Config{Store: st, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := g.Check(ctx, Input{Raw: synth(100, "newsletter", news), Accounts: []int64{a7}})
	if r2.Accounts[a7].Score != r.Accounts[a7].Score {
		t.Fatalf("after reload %v, before %v", r2.Accounts[a7].Score, r.Accounts[a7].Score)
	}
	// Untraining account a7's lesson brings it back to the base verdict.
	for i := 0; i < 30; i++ {
		g.Untrain(a7, synth(i, "newsletter", news), true)
	}
	r3, _ := g.Check(ctx, Input{Raw: synth(100, "newsletter", news), Accounts: []int64{a7}})
	if r3.Accounts[a7].Action != Accept {
		t.Fatalf("after untrain: %+v", r3.Accounts[a7])
	}
	// The account's model goes with the account.
	if err := st.RemoveAccount(ctx, "u0@example.com"); err != nil {
		t.Fatal(err)
	}
	if v, err := st.SpamModelVersion(ctx, a7); err != nil || v != 0 {
		t.Fatalf("model of a removed account: version %d, %v", v, err)
	}
}

// A model saved by another process (pimail spam train) is picked up by a
// running filter.
func TestReloadChangedModel(t *testing.T) {
	st, _ := testStore(t, 0)
	running, err := New(Config{Store: st, Logger: quiet(), ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := New(Config{Store: st, Logger: quiet(), ReloadInterval: -1})
	trainSynthetic(t, cli, BaseAccount)
	if err := cli.Save(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	r, _ := running.Check(context.Background(), Input{Raw: synth(1, "offer", spamBody), Accounts: []int64{1}})
	if r.Message.Bayes < 0.9 {
		t.Fatalf("model not reloaded: %+v", r.Message)
	}
}

// TestSaveMerges: two writers (two nodes, or the server and `pimail spam
// train`) train the same model from the same stored version; the second
// save finds the model changed, and adds its own training to it instead
// of overwriting the first's.
func TestSaveMerges(t *testing.T) {
	st, ids := testStore(t, 1)
	acct := ids[0]
	a, _ := New(Config{Store: st, Logger: quiet(), ReloadInterval: -1})
	b, _ := New(Config{Store: st, Logger: quiet(), ReloadInterval: -1})
	for _, f := range []*Filter{a, b} {
		if _, err := f.Model(acct); err != nil { // both load the empty model
			t.Fatal(err)
		}
	}
	for i := range 10 {
		a.TrainSpam(acct, synth(i, "offer", spamBody))
		b.TrainHam(acct, synth(i, "meeting", hamBody))
	}
	b.Untrain(acct, synth(0, "meeting", hamBody), false)
	if err := a.Save(); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(); err != nil {
		t.Fatalf("second save: %v", err)
	}
	c, _ := New(Config{Store: st, Logger: quiet(), ReloadInterval: -1})
	m, err := c.Model(acct)
	if err != nil {
		t.Fatal(err)
	}
	if s, h := m.Counts(); s != 10 || h != 9 {
		t.Fatalf("merged model: %d spam %d ham, want 10 and 9", s, h)
	}
	// The same model as one writer that trained it all.
	one, _ := New(Config{Logger: quiet()})
	for i := range 10 {
		one.TrainSpam(acct, synth(i, "offer", spamBody))
		one.TrainHam(acct, synth(i, "meeting", hamBody))
	}
	one.Untrain(acct, synth(0, "meeting", hamBody), false)
	mo, _ := one.Model(acct)
	var want, got bytes.Buffer
	mo.WriteTo(&want)
	m.WriteTo(&got)
	if !bytes.Equal(want.Bytes(), got.Bytes()) {
		t.Fatalf("merged model (%d tokens) differs from one trained by one writer (%d tokens)", m.Size(), mo.Size())
	}

	// Changes too many to keep apart cannot be merged: the save says so
	// and stores nothing.
	small, _ := New(Config{Store: st, Logger: quiet(), ReloadInterval: -1, MaxAccountTokens: 5})
	if _, err := small.Model(acct); err != nil {
		t.Fatal(err)
	}
	small.TrainSpam(acct, synth(99, "offer", spamBody+" many more different words than five"))
	a.TrainSpam(acct, synth(98, "offer", spamBody))
	if err := a.Save(); err != nil {
		t.Fatal(err)
	}
	v, _ := st.SpamModelVersion(context.Background(), acct)
	if err := small.Save(); !errors.Is(err, store.ErrModified) {
		t.Fatalf("unmergeable save: %v, want ErrModified", err)
	}
	if v2, _ := st.SpamModelVersion(context.Background(), acct); v2 != v {
		t.Fatal("an unmergeable save stored something")
	}
}

func TestPoolBounded(t *testing.T) {
	f, _ := New(Config{Logger: quiet(), Workers: 1})
	f.sem <- struct{}{} // the only worker is busy
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.Check(ctx, Input{Raw: synth(1, "x", "y"), Accounts: []int64{1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	<-f.sem
	if _, err := f.Check(context.Background(), Input{Raw: synth(1, "x", "y"), Accounts: []int64{1}}); err != nil {
		t.Fatal(err)
	}
}

// TestCorpusSample trains on the test corpus' training split and checks
// the classifier on its test split. The measurement on real mail is
// bench/spamacc.
func TestCorpusSample(t *testing.T) {
	corpus, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string, n int) (spam, ham [][]byte) {
		fh, err := os.Open(filepath.Join(corpus, name))
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		for i := 0; sc.Scan(); i++ {
			if i%n != 0 {
				continue
			}
			path, label, _ := strings.Cut(sc.Text(), "\t")
			raw, err := os.ReadFile(filepath.Join(corpus, path))
			if err != nil {
				t.Fatal(err)
			}
			if label == "spam" {
				spam = append(spam, raw)
			} else {
				ham = append(ham, raw)
			}
		}
		return
	}
	trS, trH := read("train.txt", 1)
	teS, teH := read("test.txt", 1)
	f, _ := New(Config{Logger: quiet()})
	for _, r := range trS {
		f.TrainSpam(BaseAccount, r)
	}
	for _, r := range trH {
		f.TrainHam(BaseAccount, r)
	}
	caught, fp := 0, 0
	for _, r := range teS {
		if v, _ := f.Check(context.Background(), Input{Raw: r, Accounts: []int64{1}}); v.Message.Action != Accept {
			caught++
		}
	}
	for _, r := range teH {
		if v, _ := f.Check(context.Background(), Input{Raw: r, Accounts: []int64{1}}); v.Message.Action != Accept {
			fp++
		}
	}
	t.Logf("trained %d/%d; spam caught %d/%d, ham false positives %d/%d", len(trS), len(trH), caught, len(teS), fp, len(teH))
	if caught*100 < len(teS)*70 || fp*100 > len(teH)*2 {
		t.Fatalf("spam caught %d/%d, ham false positives %d/%d", caught, len(teS), fp, len(teH))
	}
}

// A new installation scores with the base model pimail ships with; a
// base model trained here replaces it, and an account's own training
// adjusts it.
func TestShippedModel(t *testing.T) {
	st, _ := testStore(t, 0)
	f, err := New(Config{Logger: quiet(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := f.Model(BaseAccount)
	if ns, nh := m.Counts(); ns < 1000 || nh < 1000 || m.Size() < 10000 {
		t.Fatalf("shipped model: %d spam, %d ham, %d tokens", ns, nh, m.Size())
	}
	ctx := context.Background()
	r, _ := f.Check(ctx, Input{Raw: synth(1, "offer", spamBody), Accounts: []int64{1}})
	if r.Message.Bayes < 0.6 || r.Message.Action == Accept {
		t.Errorf("spam with the shipped model: %+v", r.Message)
	}
	ham := []byte("From: Ann <ann@example.org>\r\nTo: bob@example.com\r\nSubject: patch for the build script\r\n" +
		"Date: Mon, 2 Jan 2006 15:00:00 +0000\r\nMessage-ID: <x1@example.org>\r\n\r\n" +
		"Hi Bob,\r\n\r\nthe attached patch fixes the Makefile so that the kernel module builds again with the\r\n" +
		"new compiler; I tested it on my laptop. Could you apply it before the release on Friday?\r\n\r\nThanks, Ann\r\n")
	r, _ = f.Check(ctx, Input{Raw: ham, Accounts: []int64{1}})
	if r.Message.Bayes > 0.4 || r.Message.Action != Accept {
		t.Errorf("ham with the shipped model: %+v", r.Message)
	}
	// Nothing is stored for it.
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	if data, _, err := st.SpamModel(ctx, BaseAccount); err != nil || data != nil {
		t.Errorf("the shipped model was stored (%d bytes, %v)", len(data), err)
	}
	// Training the base model starts from empty, not from the shipped one.
	if err := f.TrainHam(BaseAccount, ham); err != nil {
		t.Fatal(err)
	}
	m, _ = f.Model(BaseAccount)
	if ns, nh := m.Counts(); ns != 0 || nh != 1 {
		t.Errorf("base model after one ham: %d spam, %d ham", ns, nh)
	}
	// NoShippedModel keeps an untrained base model empty.
	g, _ := New(Config{Logger: quiet(), NoShippedModel: true})
	if m, _ := g.Model(BaseAccount); m.Size() != 0 {
		t.Errorf("NoShippedModel: %d tokens", m.Size())
	}
}

// The blocklist verdict reaches the score: each listing adds its weight
// times DNSBLPoints, and can file a message that scored under the junk
// threshold without it.
func TestDNSBLChangesScore(t *testing.T) {
	f, err := New(Config{Logger: quiet(), NoShippedModel: true}) // the rules alone

	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	raw := synth(3, "hello", "a short note about the weekend, nothing else to say")
	clean, _ := f.Check(ctx, Input{Raw: raw, Accounts: []int64{1}})
	listed, _ := f.Check(ctx, Input{Raw: raw, Accounts: []int64{1},
		DNSBL: []DNSBLHit{{"zen.example", 1}, {"bl.example", 0.5}}})
	if got, want := listed.Message.Score-clean.Message.Score, 4.5; math.Abs(got-want) > 0.011 {
		t.Fatalf("listed %.2f, clean %.2f: the listings added %.2f, want %.2f", listed.Message.Score, clean.Message.Score, got, want)
	}
	names := []string{}
	for _, h := range listed.Message.Hits {
		names = append(names, h.Name)
	}
	if !slices.Contains(names, "DNSBL_zen.example") || !slices.Contains(names, "DNSBL_bl.example") {
		t.Errorf("hits %v", names)
	}
	if clean.Message.Action != Accept || listed.Message.Action != Junk {
		t.Errorf("clean %v (%.2f), listed %v (%.2f); want accept and junk", clean.Message.Action, clean.Message.Score, listed.Message.Action, listed.Message.Score)
	}
}
