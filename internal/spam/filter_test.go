package spam

import (
	"bufio"
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
	dir := t.TempDir()
	f, err := New(Config{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	trainSynthetic(t, f, BaseAccount)
	// Account 7 considers newsletters spam; the base has never seen them.
	news := "weekly newsletter gardening tips roses tulips compost season"
	for i := 0; i < 30; i++ {
		if err := f.TrainSpam(7, synth(i, "newsletter", news)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	r, err := f.Check(ctx, Input{Raw: synth(100, "newsletter", news), Accounts: []int64{7, 8}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Accounts[7].Action == Accept || r.Accounts[8].Action != Accept {
		t.Fatalf("account 7 %+v, account 8 %+v", r.Accounts[7], r.Accounts[8])
	}
	if r.Rejected {
		t.Fatal("rejected although one recipient accepts")
	}
	// Persisted and loaded again.
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"base.model", "account-7.model"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := New(Config{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := g.Check(ctx, Input{Raw: synth(100, "newsletter", news), Accounts: []int64{7}})
	if r2.Accounts[7].Score != r.Accounts[7].Score {
		t.Fatalf("after reload %v, before %v", r2.Accounts[7].Score, r.Accounts[7].Score)
	}
	// Untraining account 7's lesson brings it back to the base verdict.
	for i := 0; i < 30; i++ {
		g.Untrain(7, synth(i, "newsletter", news), true)
	}
	r3, _ := g.Check(ctx, Input{Raw: synth(100, "newsletter", news), Accounts: []int64{7}})
	if r3.Accounts[7].Action != Accept {
		t.Fatalf("after untrain: %+v", r3.Accounts[7])
	}
}

// A model file replaced by another process (pimail spam train) is picked
// up by a running filter.
func TestReloadChangedModel(t *testing.T) {
	dir := t.TempDir()
	running, err := New(Config{Dir: dir, Logger: quiet(), ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := New(Config{Dir: dir, Logger: quiet(), ReloadInterval: -1})
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

// TestCorpusSample trains on a slice of the shared corpus' training split
// and checks the classifier on a slice of its test split. The full
// measurement is bench/spamacc.
func TestCorpusSample(t *testing.T) {
	const corpus = "../../../shared/corpus"
	read := func(name string, n int) (spam, ham [][]byte) {
		fh, err := os.Open(filepath.Join(corpus, name))
		if err != nil {
			t.Skipf("corpus not found: %v", err)
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
	trS, trH := read("train.txt", 8)
	teS, teH := read("test.txt", 10)
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
	dir := t.TempDir()
	f, err := New(Config{Logger: quiet(), Dir: dir})
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
	// Nothing is written for it: the data directory stays empty.
	if err := f.Save(); err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("the shipped model was saved: %v", files)
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
