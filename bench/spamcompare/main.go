// Command spamcompare measures pimail's spam filter as a user meets it:
// it delivers the corpus' test split over SMTP to a running pimail (the
// built binary, base model trained with `pimail spam train --base` on
// train.txt) and reads each verdict from where the message landed, INBOX
// or Junk over IMAP, or a refusal at DATA. In the same run it scores the
// same messages with SpamAssassin's spamd and rspamd (their Bayes trained
// on train.txt by the peers' scripts), then measures throughput through
// SMTP with filtering on and off on ~8 KB and ~64 KB messages, the peers'
// rate on the same messages, pimail's peak RSS and the model sizes.
//
//	go run ./bench/spamcompare -corpus ../shared/corpus [-sa-every 1]
//
// Start the peers first (see docs/benchmarks.md): the fake DNS, redis,
// rspamd and spamd with Bayes (../shared/peers/filters/start.sh).
package main

import (
	"bufio"
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
)

type sample struct {
	name string
	spam bool
	raw  []byte
}

type options struct {
	corpus, bin, dns, spamdAddr, rspamdURL string
	saEvery, conns, perfN, limit           int
	perfSeconds                            time.Duration
	saBayesDir                             string
	keep, perfOnly                         bool
	rounds                                 int
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
	test, err := readList(o.corpus, "test.txt")
	if err != nil {
		return err
	}
	if o.limit > 0 && o.limit < len(test) {
		step := len(test) / o.limit
		var sub []sample
		for i := 0; i < len(test) && len(sub) < o.limit; i += step {
			sub = append(sub, test[i])
		}
		test = sub
	}
	tmp, err := os.MkdirTemp("", "spamcompare-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	if !o.keep {
		defer os.RemoveAll(tmp)
	}
	if o.bin == "" {
		o.bin = filepath.Join(tmp, "pimail")
		if out, err := exec.Command("go", "build", "-o", o.bin, "./cmd/pimail").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %w: %s", err, out)
		}
	}
	data := filepath.Join(tmp, "data")
	fmt.Printf("# spamcompare %s, load average %s, data %s\n\n", time.Now().UTC().Format(time.RFC3339), loadavg(), data)
	start := time.Now()
	out, err := setupPimail(o.bin, data, o.corpus)
	if err != nil {
		return err
	}
	fmt.Printf("pimail spam train --base on train.txt (%.1f s):\n%s\n", time.Since(start).Seconds(), indent(out))

	var peers []peer
	if o.rspamdURL != "" {
		peers = append(peers, rspamd{url: o.rspamdURL, client: &http.Client{Timeout: 60 * time.Second}})
	}
	if o.spamdAddr != "" {
		peers = append(peers, spamd{addr: o.spamdAddr})
	}
	if o.perfOnly {
		return perf(o, test, data, peers)
	}

	// 1. Accuracy as delivered.
	srv, err := startPimail(o.bin, data, o.dns, true)
	if err != nil {
		return err
	}
	msgs := make([][]byte, len(test))
	froms := make([]string, len(test))
	for i, s := range test {
		msgs[i] = wire(s.raw, i)
		froms[i] = envelopeFrom(s.raw)
	}
	outs, why, took, err := sendAll(srv.smtpAddr, msgs, froms, o.conns)
	if err != nil {
		srv.stop()
		return err
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
		return err
	}
	fmt.Printf("delivered %d test messages over SMTP in %.1f s (%d sessions), load average %s\n", len(test), took.Seconds(), o.conns, loadavg())
	pim := verdicts{name: "pimail (over SMTP)", spam: make([]bool, len(test)), failed: make([]bool, len(test))}
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
			fmt.Printf("  attachment policy refused %s: %s\n", test[i].name, why[i])
		case oc == failed:
			pim.failed[i] = true
			counts["refused for another reason"]++
			if counts["refused for another reason"] <= 5 {
				fmt.Printf("  refused: %s: %s\n", test[i].name, why[i])
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
	fmt.Printf("where they landed: %v\n\n", counts)
	all := []verdicts{pim}

	// 2. The peers on the same messages.
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
			sub[k] = test[i].raw
		}
		sp, fl, el := checkAll(p, sub, o.conns)
		for k, i := range idx {
			v.spam[i], v.failed[i] = sp[k], fl[k]
		}
		fmt.Printf("%s scored %d messages in %.1f s (%d clients), load average %s\n", p.name(), len(idx), el.Seconds(), o.conns, loadavg())
		all = append(all, v)
	}
	fmt.Println()
	printAccuracy(test, all, nil)
	if o.saEvery > 1 && o.spamdAddr != "" {
		fmt.Printf("\nOn SpamAssassin's subsample (every %d-th test message):\n\n", o.saEvery)
		printAccuracy(test, all, func(i int) bool { return i%o.saEvery == 0 })
	}

	// 3. Throughput, RSS, model sizes.
	return perf(o, test, data, peers)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ") + "\n"
}

// nearest returns the n test messages closest in size to size.
func nearest(test []sample, size, n int) []sample {
	c := append([]sample(nil), test...)
	abs := func(x int) int {
		if x < 0 {
			return -x
		}
		return x
	}
	sort.SliceStable(c, func(i, j int) bool { return abs(len(c[i].raw)-size) < abs(len(c[j].raw)-size) })
	return c[:min(n, len(c))]
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
		out = append(out, sample{name: filepath.Base(path), spam: label == "spam", raw: raw})
	}
	return out, sc.Err()
}
