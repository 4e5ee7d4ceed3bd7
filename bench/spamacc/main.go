// Command spamacc measures pimail's spam filter on the labelled corpus:
// it trains the base model on train.txt, scores test.txt, and prints
// recall, precision, F1 and the ham false-positive rate, overall and per
// source (sa- = SpamAssassin 2002, trec07p- = TREC 2007), then the scoring
// speed on messages of about 8 KB and 64 KB and the model size.
//
//	go run ./bench/spamacc [-corpus ../shared/corpus] [-seconds 3]
//
// With -validate it never reads test.txt: it cross-validates on train.txt
// (five folds chosen by a hash of the file name; each fold is scored by a
// model trained on the other four). Thresholds and tokenizer choices
// are made on that split; test.txt only reports the result.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"pimail/bench/spamsplit"
	"pimail/internal/message"
	"pimail/internal/spam"
)

var (
	validate    bool
	explain     int
	ruleStats   bool
	bayesWeight float64
	splitName   string
	dumpFile    string
	fit         bool
	// shipped base model
	writeShipped, trainSources string
	minCount, accountTrain     int
)

func main() {
	corpus := flag.String("corpus", "../shared/corpus", "corpus directory with train.txt and test.txt")
	seconds := flag.Float64("seconds", 3, "seconds per speed measurement")
	junk := flag.Float64("junk", 0, "junk threshold (0: the filter's default)")
	flag.Float64Var(&bayesWeight, "bayes-weight", 0, "points of the classifier at probability 1 (0: the filter's default)")
	flag.BoolVar(&validate, "validate", false, "5-fold cross-validation on train.txt (test.txt is not read)")
	flag.BoolVar(&ruleStats, "rules", false, "print how often each rule hits ham and spam")
	flag.StringVar(&writeShipped, "write-shipped", "", "train on every SpamAssassin-corpus message (train.txt and test.txt) and write the shipped base model to this file (internal/spam/shipped/base.model.gz)")
	flag.StringVar(&trainSources, "train-sources", "", "train only on messages of these sources (comma-separated file name prefixes, e.g. sa-): what a model trained on them gives on the split's test part")
	flag.IntVar(&accountTrain, "account", -1, "a new account: score with the shipped base model, after training the account's own model on up to N spam and N ham of the split's training part, newest first (0: no training of its own)")
	flag.IntVar(&minCount, "min-count", 0, "score with the trained model in the shipped form: tokens seen in fewer than N messages left out (0: the model as trained)")
	flag.BoolVar(&fit, "fit", false, "fit the classifier's weight and lean and the rules' weights by logistic regression on the scored messages (use with -validate)")
	flag.StringVar(&dumpFile, "dump", "", "write each scored message's label, classifier probability and rule points (TSV) to this file, to fit weights")
	flag.StringVar(&splitName, "split", spamsplit.Random, "split to evaluate: "+strings.Join(spamsplit.All, ", ")+", or all (a summary of each)")
	era := flag.Bool("era", false, "only check the tokens of train.txt for years and for features of one source (2002 or 2007) rather than of spam")
	flag.IntVar(&explain, "explain", 0, "print the strongest tokens of up to N misclassified messages")
	flag.Parse()
	if writeShipped != "" {
		if err := writeShippedModel(*corpus, writeShipped); err != nil {
			fmt.Fprintln(os.Stderr, "spamacc:", err)
			os.Exit(1)
		}
		return
	}
	if *era {
		if err := eraCheck(*corpus); err != nil {
			fmt.Fprintln(os.Stderr, "spamacc:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*corpus, time.Duration(*seconds*float64(time.Second)), *junk); err != nil {
		fmt.Fprintln(os.Stderr, "spamacc:", err)
		os.Exit(1)
	}
}

func run(corpus string, per time.Duration, junk float64) error {
	train, err := spamsplit.ReadList(corpus, "train.txt")
	if err != nil {
		return err
	}
	test, err := spamsplit.ReadList(corpus, "test.txt")
	if err != nil {
		return err
	}
	newFilter := func() (*spam.Filter, error) {
		return spam.New(spam.Config{JunkThreshold: junk, BayesWeight: bayesWeight, ReloadInterval: -1, NoShippedModel: accountTrain < 0,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}
	names := []string{splitName}
	if splitName == "all" {
		names = spamsplit.All
	}
	var (
		summary []string
		f       *spam.Filter
		scored  []spamsplit.Sample
	)
	for _, name := range names {
		var results []spam.Result
		scored, results, f, err = evaluate(name, train, test, newFilter)
		if err != nil {
			return err
		}
		cfg := f.Config()
		fmt.Printf("junk threshold %.1f, reject threshold %.1f\n", cfg.JunkThreshold, cfg.RejectThreshold)
		fmt.Printf("%-9s %6s %6s %8s %9s %7s %9s %10s %10s\n", "source", "spam", "ham", "recall", "precision", "F1", "ham FP", "spam rej.", "ham rej.")
		for _, src := range []string{"all", "sa-", "trec07p-"} {
			report(src, scored, results)
		}
		fmt.Println()
		for _, thr := range []float64{0, 1, 2, 3, 4, 5, 6, 8} {
			var tp, fp, nspam, nham int
			for i, s := range scored {
				flagged := results[i].Message.Score >= thr
				if s.Spam {
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
		operatingPoints(scored, results)
		if fit {
			fitWeights(scored, results, 1)
		}
		if dumpFile != "" {
			if err := dump(dumpFile, name, scored, results); err != nil {
				return err
			}
		}
		misses(scored, results, cfg.JunkThreshold)
		if ruleStats {
			printRuleStats(scored, results)
		}
		summary = append(summary, summaryRow(name, scored, results))
		fmt.Println()
	}
	fmt.Println("| split | spam | ham | recall | precision | ham FP | recall at ham FP ≤ 0.3 % | mean recall at ham FP 0.1–0.5 % |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range summary {
		fmt.Println(r)
	}

	// Model size (of the last split's model).
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

	if per <= 0 {
		return nil
	}
	for _, size := range []int{8 << 10, 64 << 10} {
		msgs := nearest(scored, size, 20)
		speed(f, msgs, size, per, 1)
		speed(f, msgs, size, per, runtime.GOMAXPROCS(0))
	}
	return nil
}

// evaluate trains a new filter on a split's training part and scores its
// test part (with -validate, the validation part: 5-fold on train.txt
// for the random split, see makeSplit for the others).
func evaluate(name string, train, test []spamsplit.Sample, newFilter func() (*spam.Filter, error)) ([]spamsplit.Sample, []spam.Result, *spam.Filter, error) {
	if name == spamsplit.Random && validate {
		// 5-fold cross-validation on train.txt: every train message is
		// scored once by a model that did not see it.
		var scored []spamsplit.Sample
		var results []spam.Result
		var f *spam.Filter
		for k := range folds {
			tr, val := splitValidation(train, k)
			var err error
			if f, err = newFilter(); err != nil {
				return nil, nil, nil, err
			}
			r, scoredBy, err := trainAndScore(f, tr, val)
			f = scoredBy
			if err != nil {
				return nil, nil, nil, err
			}
			scored = append(scored, val...)
			results = append(results, r...)
		}
		fmt.Printf("split random, %d-fold cross-validation on train.txt (test.txt not read): %d messages scored\n\n", folds, len(scored))
		return scored, results, f, nil
	}
	tr, te, err := spamsplit.Make(name, train, test, validate)
	if err != nil {
		return nil, nil, nil, err
	}
	if validate {
		name += " (validation: the test part is not read)"
	}
	spamsplit.Describe(name, tr, te)
	f, err := newFilter()
	if err != nil {
		return nil, nil, nil, err
	}
	results, f, err := trainAndScore(f, tr, te)
	return te, results, f, err
}

// summaryRow is one split's line of the summary table: the verdicts at
// the junk threshold, and threshold-free recall at ham FP ≤ 0.3 %.
func summaryRow(name string, test []spamsplit.Sample, results []spam.Result) string {
	var tp, fp, fn, tn int
	for i, s := range test {
		flagged := results[i].Message.Action != spam.Accept
		switch {
		case s.Spam && flagged:
			tp++
		case s.Spam:
			fn++
		case flagged:
			fp++
		default:
			tn++
		}
	}
	return fmt.Sprintf("| %s | %d | %d | %.2f %% | %.2f %% | %.2f %% (%d) | %.2f %% | %.2f %% |", name, tp+fn, fp+tn,
		pct(tp, tp+fn), pct(tp, tp+fp), pct(fp, fp+tn), fp, recallAtFP(test, results, 0.3), meanRecall(test, results))
}

// trainAndScore trains f's base model on train and scores test for
// account 1 (which has no model of its own).
func trainAndScore(f *spam.Filter, train, test []spamsplit.Sample) ([]spam.Result, *spam.Filter, error) {
	start := time.Now()
	n := 0
	if accountTrain >= 0 {
		// A new account: the shipped base model, and the account's own
		// training on its newest messages (what a user moves into and
		// out of Junk).
		var ns, nh int
		for i := len(train) - 1; i >= 0; i-- {
			s := train[i]
			if !trained(s) || s.Spam && ns >= accountTrain || !s.Spam && nh >= accountTrain {
				continue
			}
			if s.Spam {
				ns++
			} else {
				nh++
			}
			n++
			if err := trainAccount(f, s); err != nil {
				return nil, nil, err
			}
		}
		train = nil
	}
	for _, s := range train {
		if !trained(s) {
			continue
		}
		n++
		if err := trainOne(f, s); err != nil {
			return nil, nil, err
		}
	}
	trainTime := time.Since(start)
	fmt.Printf("trained %d messages in %.1f s (%.0f msgs/s)\n", n, trainTime.Seconds(), float64(n)/trainTime.Seconds())
	if minCount > 0 {
		var err error
		if f, err = compacted(f, f.Config()); err != nil {
			return nil, nil, err
		}
	}
	ctx := context.Background()
	results := make([]spam.Result, len(test))
	start = time.Now()
	for i, s := range test {
		r, err := f.Check(ctx, spam.Input{Raw: s.Raw, Accounts: []int64{1}})
		if err != nil {
			return nil, nil, err
		}
		results[i] = r
	}
	fmt.Printf("scored %d messages in %.1f s\n", len(test), time.Since(start).Seconds())
	return results, f, nil
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func report(src string, test []spamsplit.Sample, results []spam.Result) {
	var tp, fp, fn, tn, srej, hrej int
	for i, s := range test {
		if src != "all" && !strings.HasPrefix(s.Name(), src) {
			continue
		}
		a := results[i].Message.Action
		flagged := a != spam.Accept
		switch {
		case s.Spam && flagged:
			tp++
		case s.Spam:
			fn++
		case flagged:
			fp++
		default:
			tn++
		}
		if a == spam.Reject {
			if s.Spam {
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
func misses(test []spamsplit.Sample, results []spam.Result, thr float64) {
	shown := 0
	for i, s := range test {
		v := results[i].Message
		if !s.Spam && v.Score >= thr {
			fmt.Printf("  FP %s score %.2f %v\n", s.Name(), v.Score, v.Hits)
			if explain > 0 {
				for _, c := range v.Clues {
					fmt.Printf("       %.3f %q\n", c.Prob, c.Token)
				}
			}
		}
		if s.Spam && v.Score < thr && shown < explain {
			shown++
			fmt.Printf("  FN %s score %.2f %v\n", s.Name(), v.Score, v.Hits)
			for _, c := range v.Clues {
				fmt.Printf("       %.3f %q\n", c.Prob, c.Token)
			}
		}
	}
}

// scores returns the ham scores, highest first, and the spam scores.
func scores(test []spamsplit.Sample, results []spam.Result) (hams, spams []float64) {
	for i, s := range test {
		if s.Spam {
			spams = append(spams, results[i].Message.Score)
		} else {
			hams = append(hams, results[i].Message.Score)
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(hams)))
	return hams, spams
}

// cutFor is the lowest threshold that flags at most fpr % of the hams
// (sorted highest first): just above the first ham not allowed.
func cutFor(hams []float64, fpr float64) float64 {
	allowed := int(fpr / 100 * float64(len(hams)))
	return hams[min(allowed, len(hams)-1)] + 0.001
}

func recallAt(spams []float64, thr float64) float64 {
	n := 0
	for _, sc := range spams {
		if sc >= thr {
			n++
		}
	}
	return pct(n, len(spams))
}

// recallAtFP is the spam recall at the lowest threshold that keeps ham
// false positives at or under fpr %.
func recallAtFP(test []spamsplit.Sample, results []spam.Result, fpr float64) float64 {
	hams, spams := scores(test, results)
	if len(hams) == 0 {
		return 0
	}
	return recallAt(spams, cutFor(hams, fpr))
}

// meanRecall is a steadier summary than any one point: the mean recall
// over every allowed number of false positives from 0.1 % to 0.5 % of
// the ham.
func meanRecall(test []spamsplit.Sample, results []spam.Result) float64 {
	hams, spams := scores(test, results)
	if len(hams) == 0 {
		return 0
	}
	var sum float64
	lo, hi := len(hams)/1000, len(hams)/200
	for k := lo; k <= hi; k++ {
		sum += recallAt(spams, hams[min(k, len(hams)-1)]+0.001)
	}
	return sum / float64(hi-lo+1)
}

// operatingPoints prints, threshold-free, the spam recall each source
// would have at the lowest threshold that keeps ham false positives at or
// under 0.1, 0.2 and 0.3 % overall: the number to compare tokenizer and
// classifier variants by, before choosing a threshold.
func operatingPoints(test []spamsplit.Sample, results []spam.Result) {
	hams, _ := scores(test, results)
	if len(hams) == 0 {
		return
	}
	fmt.Printf("mean recall at ham FP 0.1-0.5 %%: %.2f %%\n", meanRecall(test, results))
	for _, fpr := range []float64{0.1, 0.2, 0.3} {
		thr := cutFor(hams, fpr)
		fmt.Printf("at ham FP <= %.1f %% (threshold %.2f):", fpr, thr)
		for _, src := range []string{"all", "sa-", "trec07p-"} {
			var tp, ns, fp, nh int
			for i, s := range test {
				if src != "all" && spamsplit.Source(s) != src {
					continue
				}
				hit := results[i].Message.Score >= thr
				if s.Spam {
					ns++
					if hit {
						tp++
					}
				} else {
					nh++
					if hit {
						fp++
					}
				}
			}
			fmt.Printf("  %s recall %.2f %% FP %d/%d", src, pct(tp, ns), fp, nh)
		}
		fmt.Println()
	}
}

const folds = 5

// splitValidation puts the train files of fold k (by an FNV hash of the
// name, so the choice is fixed and independent of the corpus' own split)
// into a validation set and the rest into a training set.
func splitValidation(all []spamsplit.Sample, k int) (train, val []spamsplit.Sample) {
	for _, s := range all {
		h := fnv.New32a()
		h.Write([]byte(s.Name()))
		if int(h.Sum32()%folds) == k {
			val = append(val, s)
		} else {
			train = append(train, s)
		}
	}
	return train, val
}

// printRuleStats prints, per rule, the share of ham and of spam it hits.
func printRuleStats(test []spamsplit.Sample, results []spam.Result) {
	type hc struct{ ham, spam int }
	stats := map[string]*hc{}
	var nham, nspam int
	for i, s := range test {
		if s.Spam {
			nspam++
		} else {
			nham++
		}
		for _, h := range results[i].Message.Hits {
			c := stats[h.Name]
			if c == nil {
				c = &hc{}
				stats[h.Name] = c
			}
			if s.Spam {
				c.spam++
			} else {
				c.ham++
			}
		}
	}
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("\n%-24s %8s %8s\n", "rule", "ham %", "spam %")
	for _, n := range names {
		fmt.Printf("%-24s %8.2f %8.2f\n", n, pct(stats[n].ham, nham), pct(stats[n].spam, nspam))
	}
}

func nearest(test []spamsplit.Sample, size, n int) []spamsplit.Sample {
	c := append([]spamsplit.Sample(nil), test...)
	abs := func(x int) int {
		if x < 0 {
			return -x
		}
		return x
	}
	sort.Slice(c, func(i, j int) bool { return abs(len(c[i].Raw)-size) < abs(len(c[j].Raw)-size) })
	return c[:min(n, len(c))]
}

// speed scores msgs round robin for per with the given goroutines and
// prints messages per second. Parsing is included, as in delivery.
func speed(f *spam.Filter, msgs []spamsplit.Sample, size int, per time.Duration, workers int) {
	var total int64
	for _, m := range msgs {
		total += int64(len(m.Raw))
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
				if _, err := f.Check(context.Background(), spam.Input{Raw: m.Raw, Parsed: message.Parse(m.Raw), Accounts: []int64{1}}); err != nil {
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

// eraCheck reads train.txt's tokens and prints (1) every token with a
// year in it seen in 20 or more messages, and (2) the 30 tokens whose
// frequency differs most between the sources, with their share of each
// source's spam and ham: a token that is common in one source's ham and
// spam alike says "2002" or "2007", not "spam"; one that leans the same
// way in both sources is a spam (or ham) feature that only happens to be
// commoner in one year.
func eraCheck(corpus string) error {
	train, err := spamsplit.ReadList(corpus, "train.txt")
	if err != nil {
		return err
	}
	type split struct{ saSpam, saHam, trSpam, trHam int }
	counts := map[string]*split{}
	var n split
	for _, s := range train {
		sa := strings.HasPrefix(s.Name(), "sa-")
		bump := func(c *split) {
			switch {
			case sa && s.Spam:
				c.saSpam++
			case sa:
				c.saHam++
			case s.Spam:
				c.trSpam++
			default:
				c.trHam++
			}
		}
		bump(&n)
		for _, t := range spam.Tokens(s.Raw, nil) {
			c := counts[t]
			if c == nil {
				c = &split{}
				counts[t] = c
			}
			bump(c)
		}
	}
	share := func(a, b int) float64 { return float64(a) / float64(max(b, 1)) }
	fmt.Printf("train.txt: sa- %d spam %d ham, trec07p- %d spam %d ham\n\n", n.saSpam, n.saHam, n.trSpam, n.trHam)
	fmt.Println("tokens holding a year (19xx/20xx) seen in 20 or more messages:")
	found := 0
	for t, c := range counts {
		if c.saSpam+c.saHam+c.trSpam+c.trHam >= 20 && containsYear(t) {
			found++
			fmt.Printf("  %q: sa- spam %d ham %d, trec07p- spam %d ham %d\n", t, c.saSpam, c.saHam, c.trSpam, c.trHam)
		}
	}
	if found == 0 {
		fmt.Println("  none")
	}
	type diff struct {
		tok string
		d   float64
		c   *split
	}
	var ds []diff
	for t, c := range counts {
		if c.saSpam+c.saHam+c.trSpam+c.trHam < 50 {
			continue
		}
		d := share(c.saSpam+c.saHam, n.saSpam+n.saHam) - share(c.trSpam+c.trHam, n.trSpam+n.trHam)
		ds = append(ds, diff{t, d, c})
	}
	sort.Slice(ds, func(i, j int) bool { return math.Abs(ds[i].d) > math.Abs(ds[j].d) })
	fmt.Println("\ntokens whose share of messages differs most between the sources (sa- minus trec07p-),")
	fmt.Println("with the share of each source's spam and ham that has them:")
	fmt.Printf("  %-34s %6s   %-17s %-17s\n", "token", "diff", "sa- spam / ham", "trec spam / ham")
	for _, x := range ds[:min(30, len(ds))] {
		fmt.Printf("  %-34q %+6.2f   %5.2f / %5.2f     %5.2f / %5.2f\n", x.tok, x.d,
			share(x.c.saSpam, n.saSpam), share(x.c.saHam, n.saHam), share(x.c.trSpam, n.trSpam), share(x.c.trHam, n.trHam))
	}
	return nil
}

// containsYear reports a run of exactly four digits from 1900 to 2099.
func containsYear(s string) bool {
	run := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] >= '0' && s[i] <= '9' {
			run++
			continue
		}
		if run == 4 && (s[i-4:i-2] == "19" || s[i-4:i-2] == "20") {
			return true
		}
		run = 0
	}
	return false
}

// dump writes one line per scored message: split, file, label, source,
// the classifier's probability (-1 untrained), the points of the
// classifier and each rule hit as name=points.
func dump(path, split string, test []spamsplit.Sample, results []spam.Result) error {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	w := bufio.NewWriter(fh)
	for i, s := range test {
		v := results[i].Message
		label := "ham"
		if s.Spam {
			label = "spam"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.6f", split, s.Name(), label, spamsplit.Source(s), v.Bayes)
		for _, h := range v.Hits {
			fmt.Fprintf(w, "\t%s=%.3f", h.Name, h.Score)
		}
		w.WriteString("\n")
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return fmt.Errorf("dump: %w", err)
	}
	return fh.Close()
}
