// Command spamcompare measures pimail's spam filter as a user meets it:
// for each split of the corpus (bench/spamsplit: the random train.txt /
// test.txt, the time-ordered one and the two cross-source ones) it
// trains a fresh pimail's base model with `pimail spam train --base`,
// delivers the test messages over SMTP to the running binary and reads
// each verdict from where the message landed, INBOX or Junk over IMAP, or
// a refusal at DATA. In the same run it trains SpamAssassin's and
// rspamd's Bayes from empty on the same training messages and scores the
// same test messages with them. -shipped adds a pimail whose base model
// is not trained: the model it ships with, as a new installation has it.
// Then it measures throughput through SMTP with filtering on and off on
// ~8 KB and ~64 KB messages, the peers' rate on the same messages,
// pimail's peak RSS and the model sizes.
//
//	go run ./bench/spamcompare -corpus ../shared/corpus -split all [-sa-every 4] [-shipped]
//
// Start the peers first (see docs/benchmarks.md): the fake DNS, redis,
// rspamd and spamd with Bayes (../shared/peers/filters/start.sh), inside
// flock /tmp/pimail-peer-filters.lock.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"pimail/bench/spamsplit"
)

type options struct {
	corpus, bin, dns, spamdAddr, rspamdURL string
	saEvery, conns, perfN, limit           int
	perfSeconds                            time.Duration
	saBayesDir                             string
	keep, perfOnly, noPerf, shipped        bool
	rounds                                 int
	split, peers                           string
}

func main() {
	var o options
	flag.StringVar(&o.corpus, "corpus", "../shared/corpus", "corpus with train.txt and test.txt")
	flag.StringVar(&o.bin, "pimail", "", "pimail binary (default: go build ./cmd/pimail into a temporary directory)")
	flag.StringVar(&o.dns, "dns", "127.0.0.1:5453", "DNS server for pimail (the peers' NXDOMAIN resolver keeps SPF/DKIM/DMARC offline)")
	flag.StringVar(&o.spamdAddr, "spamd", "127.0.0.1:2783", "spamd address; empty skips SpamAssassin")
	flag.StringVar(&o.rspamdURL, "rspamd", "http://127.0.0.1:11433", "rspamd normal worker; empty skips rspamd")
	flag.IntVar(&o.saEvery, "sa-every", 1, "SpamAssassin scores every k-th test message (a fixed subsample when it is too slow)")
	flag.IntVar(&o.conns, "conns", 2, "parallel SMTP sessions and peer clients")
	flag.IntVar(&o.perfN, "perf-n", 300, "messages per SMTP throughput run")
	flag.DurationVar(&o.perfSeconds, "perf-time", 15*time.Second, "duration of each peer throughput run")
	flag.StringVar(&o.saBayesDir, "sa-bayes", "../shared/peers/filters/state/sa-bayes", "SpamAssassin Bayes directory (for its size)")
	flag.BoolVar(&o.keep, "keep", false, "keep pimail's data directory")
	flag.IntVar(&o.rounds, "rounds", 3, "SMTP throughput runs of each kind (filter on, off), alternating; the median is reported")
	flag.BoolVar(&o.perfOnly, "perf-only", false, "skip the accuracy runs (throughput, RSS and model sizes only)")
	flag.StringVar(&o.split, "split", spamsplit.Random, "split: "+strings.Join(spamsplit.All, ", ")+", or all")
	flag.StringVar(&o.peers, "peers", "../shared/peers/filters", "the filters peer: spamcompare trains its SpamAssassin and rspamd on each split (empty: use them as they are trained)")
	flag.BoolVar(&o.shipped, "shipped", false, "also deliver each split's test messages to a pimail with the shipped base model and no training")
	flag.BoolVar(&o.noPerf, "no-perf", false, "skip the throughput runs")
	flag.IntVar(&o.limit, "limit", 0, "use N evenly spaced test messages (a smoke test; 0 = all)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "spamcompare:", err)
		os.Exit(1)
	}
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func run(o options) error {
	train, err := spamsplit.ReadList(o.corpus, "train.txt")
	if err != nil {
		return err
	}
	test, err := spamsplit.ReadList(o.corpus, "test.txt")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "spamcompare-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	if !o.keep {
		defer os.RemoveAll(tmp)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // the peers' users read the lists
		return fmt.Errorf("temp dir: %w", err)
	}
	if o.bin == "" {
		o.bin = filepath.Join(tmp, "pimail")
		if out, err := exec.Command("go", "build", "-o", o.bin, "./cmd/pimail").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %w: %s", err, out)
		}
	}
	fmt.Printf("# spamcompare %s, load average %s, data %s\n\n", time.Now().UTC().Format(time.RFC3339), loadavg(), tmp)
	var peers []peer
	if o.rspamdURL != "" {
		peers = append(peers, rspamd{url: o.rspamdURL, client: &http.Client{Timeout: 60 * time.Second}})
	}
	if o.spamdAddr != "" {
		peers = append(peers, spamd{addr: o.spamdAddr})
	}
	names := []string{o.split}
	if o.split == "all" {
		names = spamsplit.All
	}
	var data string
	var summary []string
	for _, name := range names {
		tr, te, err := spamsplit.Make(name, train, test, false)
		if err != nil {
			return err
		}
		te = subsample(te, o.limit)
		dir := filepath.Join(tmp, strings.ReplaceAll(name, ">", "-to-"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("split dir: %w", err)
		}
		list, err := writeLists(dir, o.corpus, tr)
		if err != nil {
			return err
		}
		fmt.Printf("\n## Split %s\n\n", name)
		spamsplit.Describe(name, tr, te)
		data = filepath.Join(dir, "data")
		start := time.Now()
		out, err := setupPimail(o.bin, data, list)
		if err != nil {
			return err
		}
		fmt.Printf("pimail spam train --base (%.1f s):\n%s\n", time.Since(start).Seconds(), indent(out))
		if o.perfOnly {
			return perf(o, test, data, peers)
		}
		if o.peers != "" && len(peers) > 0 {
			if err := trainPeers(o, dir); err != nil {
				return err
			}
		}
		all, err := accuracy(o, te, data, "pimail (over SMTP)", peers)
		if err != nil {
			return err
		}
		if o.shipped {
			fresh := filepath.Join(dir, "data-shipped")
			if _, err := setupPimail(o.bin, fresh, ""); err != nil {
				return err
			}
			sh, err := accuracy(o, te, fresh, "pimail, shipped model, no training", nil)
			if err != nil {
				return err
			}
			all = append(all, sh...)
		}
		fmt.Println()
		printAccuracy(te, all, nil)
		if o.saEvery > 1 && o.spamdAddr != "" {
			fmt.Printf("\nOn SpamAssassin's subsample (every %d-th test message):\n\n", o.saEvery)
			printAccuracy(te, all, func(i int) bool { return i%o.saEvery == 0 })
		}
		summary = append(summary, summaryRows(name, te, all, o.saEvery)...)
	}
	fmt.Print("\n## Summary\n\n")
	fmt.Println("| split | filter | spam | ham | recall | precision | ham FP |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	for _, r := range summary {
		fmt.Println(r)
	}
	if o.noPerf {
		return nil
	}
	// Throughput, RSS, model sizes: on the last split's data.
	return perf(o, test, data, peers)
}

// subsample keeps n evenly spaced messages (a smoke test; 0 keeps all).
func subsample(test []spamsplit.Sample, n int) []spamsplit.Sample {
	if n <= 0 || n >= len(test) {
		return test
	}
	step := len(test) / n
	var sub []spamsplit.Sample
	for i := 0; i < len(test) && len(sub) < n; i += step {
		sub = append(sub, test[i])
	}
	return sub
}

// accuracy delivers test over SMTP to a pimail serving data and reads
// where each message landed; then it scores the same messages with the
// peers (SpamAssassin on every saEvery-th only).
func accuracy(o options, test []spamsplit.Sample, data, label string, peers []peer) ([]verdicts, error) {
	srv, err := startPimail(o.bin, data, o.dns, true)
	if err != nil {
		return nil, err
	}
	msgs := make([][]byte, len(test))
	froms := make([]string, len(test))
	for i, s := range test {
		msgs[i] = wire(s.Raw, i)
		froms[i] = envelopeFrom(s.Raw)
	}
	outs, why, took, err := sendAll(srv.smtpAddr, msgs, froms, o.conns)
	if err != nil {
		srv.stop()
		return nil, err
	}
	nAccepted := 0
	for _, oc := range outs {
		if oc == accepted {
			nAccepted++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	inbox, junk, err := waitDelivered(ctx, srv.imap, nAccepted)
	cancel()
	srv.stop()
	if err != nil {
		return nil, err
	}
	fmt.Printf("%s: delivered %d test messages over SMTP in %.1f s (%d sessions), load average %s\n", label, len(test), took.Seconds(), o.conns, loadavg())
	pim := verdicts{name: label, spam: make([]bool, len(test)), failed: make([]bool, len(test))}
	counts := map[string]int{}
	for i, oc := range outs {
		switch {
		case oc == rejectedSpam:
			pim.spam[i] = true
			counts["rejected at DATA"]++
		case oc == refusedAV:
			// Refused by the attachment policy: the user never sees it, so a
			// refused ham is a false positive of the filtering as a whole.
			pim.spam[i] = true
			counts["refused by the attachment policy"]++
			fmt.Printf("  attachment policy refused %s: %s\n", test[i].Name(), why[i])
		case oc == failed:
			pim.failed[i] = true
			counts["refused for another reason"]++
			if counts["refused for another reason"] <= 5 {
				fmt.Printf("  refused: %s: %s\n", test[i].Name(), why[i])
			}
		case junk[i]:
			pim.spam[i] = true
			counts["Junk"]++
		case inbox[i]:
			counts["INBOX"]++
		default:
			pim.failed[i] = true
			counts["accepted but not found"]++
		}
	}
	fmt.Printf("where they landed: %v\n", counts)
	all := []verdicts{pim}
	for _, p := range peers {
		v := verdicts{name: p.name(), spam: make([]bool, len(test)), failed: make([]bool, len(test)), skipped: make([]bool, len(test))}
		var idx []int
		for i := range test {
			if _, sa := p.(spamd); sa && i%o.saEvery != 0 {
				v.skipped[i] = true
				continue
			}
			idx = append(idx, i)
		}
		sub := make([][]byte, len(idx))
		for k, i := range idx {
			sub[k] = test[i].Raw
		}
		sp, fl, el := checkAll(p, sub, o.conns)
		for k, i := range idx {
			v.spam[i], v.failed[i] = sp[k], fl[k]
		}
		fmt.Printf("%s scored %d messages in %.1f s (%d clients), load average %s\n", p.name(), len(idx), el.Seconds(), o.conns, loadavg())
		all = append(all, v)
	}
	return all, nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ") + "\n"
}

// nearest returns the n test messages closest in size to size.
func nearest(test []spamsplit.Sample, size, n int) []spamsplit.Sample {
	c := append([]spamsplit.Sample(nil), test...)
	abs := func(x int) int {
		if x < 0 {
			return -x
		}
		return x
	}
	sort.SliceStable(c, func(i, j int) bool { return abs(len(c[i].Raw)-size) < abs(len(c[j].Raw)-size) })
	return c[:min(n, len(c))]
}
