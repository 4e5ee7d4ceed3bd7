// Command spamacc measures pimail's spam filter on the labelled corpus:
// it trains the base model on train.txt, scores test.txt, and prints
// recall, precision, F1 and the ham false-positive rate, overall and per
// source (sa- = SpamAssassin 2002, trec07p- = TREC 2007), then the scoring
// speed on messages of about 8 KB and 64 KB and the model size.
//
//	go run ./bench/spamacc [-corpus ../shared/corpus] [-seconds 3]
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pimail/internal/message"
	"pimail/internal/spam"
)

type sample struct {
	path string
	spam bool
	raw  []byte
}

func main() {
	corpus := flag.String("corpus", "../shared/corpus", "corpus directory with train.txt and test.txt")
	seconds := flag.Float64("seconds", 3, "seconds per speed measurement")
	junk := flag.Float64("junk", 0, "junk threshold (0: the filter's default)")
	flag.Parse()
	if err := run(*corpus, time.Duration(*seconds*float64(time.Second)), *junk); err != nil {
		fmt.Fprintln(os.Stderr, "spamacc:", err)
		os.Exit(1)
	}
}

func run(corpus string, per time.Duration, junk float64) error {
	train, err := readList(corpus, "train.txt")
	if err != nil {
		return err
	}
	test, err := readList(corpus, "test.txt")
	if err != nil {
		return err
	}
	f, err := spam.New(spam.Config{JunkThreshold: junk, ReloadInterval: -1,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	cfg := f.Config()
	start := time.Now()
	for _, s := range train {
		if s.spam {
			err = f.TrainSpam(spam.BaseAccount, s.raw)
		} else {
			err = f.TrainHam(spam.BaseAccount, s.raw)
		}
		if err != nil {
			return err
		}
	}
	trainTime := time.Since(start)
	fmt.Printf("trained %d messages in %.1f s (%.0f msgs/s)\n", len(train), trainTime.Seconds(), float64(len(train))/trainTime.Seconds())

	ctx := context.Background()
	results := make([]spam.Result, len(test))
	start = time.Now()
	for i, s := range test {
		r, err := f.Check(ctx, spam.Input{Raw: s.raw, Accounts: []int64{1}})
		if err != nil {
			return err
		}
		results[i] = r
	}
	fmt.Printf("scored %d test messages in %.1f s\n\n", len(test), time.Since(start).Seconds())
	fmt.Printf("junk threshold %.1f, reject threshold %.1f\n", cfg.JunkThreshold, cfg.RejectThreshold)
	fmt.Printf("%-9s %6s %6s %8s %9s %7s %9s %10s %10s\n", "source", "spam", "ham", "recall", "precision", "F1", "ham FP", "spam rej.", "ham rej.")
	for _, src := range []string{"all", "sa-", "trec07p-"} {
		report(src, test, results)
	}
	fmt.Println()
	for _, thr := range []float64{0, 1, 2, 3, 4, 5, 6, 8} {
		var tp, fp, nspam, nham int
		for i, s := range test {
			flagged := results[i].Message.Score >= thr
			if s.spam {
				nspam++
				if flagged {
					tp++
				}
			} else {
				nham++
				if flagged {
					fp++
				}
			}
		}
		fmt.Printf("at threshold %.1f: recall %.2f %%, ham FP %.2f %% (%d)\n", thr, pct(tp, nspam), pct(fp, nham), fp)
	}
	misses(test, results, cfg.JunkThreshold)

	// Model size.
	m, _ := f.Model(spam.BaseAccount)
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		return err
	}
	ns, nh := m.Counts()
	fmt.Printf("\nbase model: %d spam + %d ham trained, %d tokens, file %d bytes (%.1f KB)\n", ns, nh, m.Size(), buf.Len(), float64(buf.Len())/1024)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	fmt.Printf("heap in use after GC (corpus bytes included): %.1f MB\n\n", float64(ms.HeapInuse)/(1<<20))

	for _, size := range []int{8 << 10, 64 << 10} {
		msgs := nearest(test, size, 20)
		speed(f, msgs, size, per, 1)
		speed(f, msgs, size, per, runtime.GOMAXPROCS(0))
	}
	return nil
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func report(src string, test []sample, results []spam.Result) {
	var tp, fp, fn, tn, srej, hrej int
	for i, s := range test {
		if src != "all" && !strings.HasPrefix(filepath.Base(s.path), src) {
			continue
		}
		a := results[i].Message.Action
		flagged := a != spam.Accept
		switch {
		case s.spam && flagged:
			tp++
		case s.spam:
			fn++
		case flagged:
			fp++
		default:
			tn++
		}
		if a == spam.Reject {
			if s.spam {
				srej++
			} else {
				hrej++
			}
		}
	}
	recall := pct(tp, tp+fn)
	prec := pct(tp, tp+fp)
	f1 := 0.0
	if recall+prec > 0 {
		f1 = 2 * recall * prec / (recall + prec)
	}
	fmt.Printf("%-9s %6d %6d %7.2f%% %8.2f%% %6.2f%% %6.2f%%(%d) %9.1f%% %9d\n", src, tp+fn, fp+tn, recall, prec, f1, pct(fp, fp+tn), fp, pct(srej, tp+fn), hrej)
}

// misses prints the false positives and a few false negatives, to tune rules.
func misses(test []sample, results []spam.Result, thr float64) {
	shown := 0
	for i, s := range test {
		v := results[i].Message
		if !s.spam && v.Score >= thr {
			fmt.Printf("  FP %s score %.2f %v\n", filepath.Base(s.path), v.Score, v.Hits)
		}
		if s.spam && v.Score < thr && shown < 40 && os.Getenv("SPAMACC_FN") != "" {
			shown++
			fmt.Printf("  FN %s score %.2f %v\n", filepath.Base(s.path), v.Score, v.Hits)
		}
	}
}

func nearest(test []sample, size, n int) []sample {
	c := append([]sample(nil), test...)
	abs := func(x int) int {
		if x < 0 {
			return -x
		}
		return x
	}
	sort.Slice(c, func(i, j int) bool { return abs(len(c[i].raw)-size) < abs(len(c[j].raw)-size) })
	return c[:min(n, len(c))]
}

// speed scores msgs round robin for per with the given goroutines and
// prints messages per second. Parsing is included, as in delivery.
func speed(f *spam.Filter, msgs []sample, size int, per time.Duration, workers int) {
	var total int64
	for _, m := range msgs {
		total += int64(len(m.raw))
	}
	var n atomic.Int64
	deadline := time.Now().Add(per)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline) && i < 100_000_000; i++ {
				m := msgs[i%len(msgs)]
				if _, err := f.Check(context.Background(), spam.Input{Raw: m.raw, Parsed: message.Parse(m.raw), Accounts: []int64{1}}); err != nil {
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	rate := float64(n.Load()) / per.Seconds()
	fmt.Printf("scoring ~%d KB messages (%d real ones, mean %d bytes), %d goroutine(s): %.0f msgs/s, %.2f ms/msg\n",
		size>>10, len(msgs), total/int64(len(msgs)), workers, rate, 1000/rate*float64(workers))
}

func readList(corpus, name string) ([]sample, error) {
	fh, err := os.Open(filepath.Join(corpus, name))
	if err != nil {
		return nil, fmt.Errorf("read split: %w", err)
	}
	defer fh.Close()
	var out []sample
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		path, label, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(corpus, path))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		out = append(out, sample{path: path, spam: label == "spam", raw: raw})
	}
	return out, sc.Err()
}
