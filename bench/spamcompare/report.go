package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"pimail/bench/spamsplit"
)

// verdicts are one filter's answers on the test split.
type verdicts struct {
	name            string
	spam            []bool
	failed, skipped []bool // not counted
}

// printAccuracy prints a markdown table: recall, precision, F1 and ham
// false positives per filter and source. keep (if not nil) restricts the
// messages.
func printAccuracy(test []spamsplit.Sample, all []verdicts, keep func(int) bool) {
	fmt.Println("| filter | source | spam | ham | recall | precision | F1 | ham FP | not scored |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, v := range all {
		for _, src := range []string{"all", "sa-", "trec07p-"} {
			var tp, fn, fp, tn, lost int
			for i, s := range test {
				if keep != nil && !keep(i) || src != "all" && !strings.HasPrefix(s.Name(), src) {
					continue
				}
				if v.skipped != nil && v.skipped[i] {
					continue
				}
				if v.failed[i] {
					lost++
					continue
				}
				switch {
				case s.Spam && v.spam[i]:
					tp++
				case s.Spam:
					fn++
				case v.spam[i]:
					fp++
				default:
					tn++
				}
			}
			r, p := pct(tp, tp+fn), pct(tp, tp+fp)
			f1 := 0.0
			if r+p > 0 {
				f1 = 2 * r * p / (r + p)
			}
			fmt.Printf("| %s | %s | %d | %d | %.2f %% | %.2f %% | %.2f %% | %.2f %% (%d) | %d |\n",
				v.name, src, tp+fn, fp+tn, r, p, f1, pct(fp, fp+tn), fp, lost)
		}
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// summaryRows are a split's lines of the summary table: each filter on
// all test messages it scored, and, when SpamAssassin scored a
// subsample, every filter again on that subsample.
func summaryRows(split string, test []spamsplit.Sample, all []verdicts, saEvery int) []string {
	var rows []string
	row := func(v verdicts, keep func(int) bool, suffix string) {
		var tp, fn, fp, tn int
		for i, s := range test {
			if keep != nil && !keep(i) || v.skipped != nil && v.skipped[i] || v.failed[i] {
				continue
			}
			switch {
			case s.Spam && v.spam[i]:
				tp++
			case s.Spam:
				fn++
			case v.spam[i]:
				fp++
			default:
				tn++
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s%s | %d | %d | %.2f %% | %.2f %% | %.2f %% (%d) |", split, v.name, suffix,
			tp+fn, fp+tn, pct(tp, tp+fn), pct(tp, tp+fp), pct(fp, fp+tn), fp))
	}
	for _, v := range all {
		if v.name == "SpamAssassin" && saEvery > 1 {
			continue // on its subsample below
		}
		row(v, nil, "")
	}
	if saEvery > 1 {
		for _, v := range all {
			row(v, func(i int) bool { return i%saEvery == 0 }, fmt.Sprintf(" (every %d-th)", saEvery))
		}
	}
	return rows
}

// perf measures SMTP throughput with the filter on and off on ~8 KB and
// ~64 KB messages, pimail's peak RSS during the 64 KB runs, the peers'
// rate on the same messages, and the model sizes.
func perf(o options, test []spamsplit.Sample, data string, peers []peer) error {
	fmt.Printf("\n## Throughput (%d messages per SMTP run, %d sessions, median of %d runs alternating on/off; peers %d clients for %s)\n\n",
		o.perfN, o.conns, o.rounds, o.conns, o.perfSeconds)
	fmt.Println("| messages | pimail filter on | pimail filter off | pimail peak RSS on / off | pimail filter alone | " + peerNames(peers) + " load avg |")
	fmt.Println("|---|---:|---:|---:|---:|" + strings.Repeat("---:|", len(peers)) + "---|")
	var notes []string
	for _, size := range []int{8 << 10, 64 << 10} {
		set := nearest(test, size, 40)
		var mean int
		for _, s := range set {
			mean += len(s.Raw)
		}
		mean /= len(set)
		// Filter on and off alternate, o.rounds times each, each run on a
		// fresh start of pimail; the median rate of each is reported.
		var runs, cpus [2][]float64
		var rss [2]int64
		for range o.rounds {
			for k, filter := range []bool{true, false} {
				rate, peak, cpu, err := smtpRate(o, data, set, filter)
				if err != nil {
					return err
				}
				runs[k] = append(runs[k], rate)
				cpus[k] = append(cpus[k], cpu)
				rss[k] = max(rss[k], peak)
			}
		}
		rates := [2]float64{median(runs[0]), median(runs[1])}
		note := fmt.Sprintf("~%d KB runs: SMTP with the filter on %s msgs/s, off %s msgs/s (on / off %.0f %%); pimail CPU per message on %.2f ms, off %.2f ms (medians)",
			size>>10, list(runs[0]), list(runs[1]), 100*rates[0]/rates[1], median(cpus[0]), median(cpus[1]))
		raws := make([][]byte, len(set))
		for i, s := range set {
			raws[i] = s.Raw
		}
		alone, aloneCPU, err := filterRate(data, raws, o.conns, o.perfSeconds)
		if err != nil {
			return err
		}
		note += fmt.Sprintf("; the filter alone %.1f msgs/s, %.3f ms CPU per message", alone, aloneCPU)
		var peerCols string
		for _, p := range peers {
			r, errs := peerRate(p, raws, o.conns, o.perfSeconds)
			peerCols += fmt.Sprintf(" %.1f msgs/s", r)
			if errs > 0 {
				peerCols += fmt.Sprintf(" (%d errors)", errs)
			}
			peerCols += " |"
			if r > 0 {
				note += fmt.Sprintf("; vs %s: filter alone %.0f×, through SMTP %.1f×", p.name(), alone/r, rates[0]/r)
			}
		}
		notes = append(notes, note)
		fmt.Printf("| %d real ones, mean %d bytes | %.1f msgs/s | %.1f msgs/s | %.0f / %.0f MB | %.1f msgs/s |%s %s |\n",
			len(set), mean, rates[0], rates[1], float64(rss[0])/1024, float64(rss[1])/1024, alone, peerCols, loadavg())
	}
	fmt.Println()
	for _, n := range notes {
		fmt.Println(n)
	}
	acct, err := trainAccount(o.bin, data, o.corpus, 250)
	if err != nil {
		return err
	}
	base, err := modelSize(data, "")
	if err != nil {
		return err
	}
	fmt.Printf("model sizes: pimail base model %s; pimail account model after 250 spam + 250 ham of its own %s; SpamAssassin Bayes %s; rspamd Bayes (redis used_memory) %s\n",
		base, acct, dirSize(o.saBayesDir), redisMemory())
	return nil
}

// smtpRate starts pimail (filter on or off), sends o.perfN messages from
// set after a warm-up of 10, and returns msgs/s, the peak RSS in KiB and
// pimail's CPU time per message in ms (the whole process: SMTP, storage,
// filtering).
func smtpRate(o options, data string, set []spamsplit.Sample, filter bool) (float64, int64, float64, error) {
	srv, err := startPimail(o.bin, data, o.dns, filter)
	if err != nil {
		return 0, 0, 0, err
	}
	defer srv.stop()
	msgs := make([][]byte, o.perfN)
	froms := make([]string, o.perfN)
	for i := range msgs {
		s := set[i%len(set)]
		msgs[i] = wire(s.Raw, 1_000_000+i)
		froms[i] = envelopeFrom(s.Raw)
	}
	// Warm up (connections, model load), then measure.
	if _, _, _, err := sendAll(srv.smtpAddr, msgs[:10], froms[:10], o.conns); err != nil {
		return 0, 0, 0, err
	}
	srv.peakRSS.Store(0)
	srv.sampling.Store(true)
	cpu0 := cpuSeconds(srv.cmd.Process.Pid)
	outs, _, took, err := sendAll(srv.smtpAddr, msgs, froms, o.conns)
	cpu := cpuSeconds(srv.cmd.Process.Pid) - cpu0
	srv.sampling.Store(false)
	peak := max(srv.peakRSS.Load(), rssKiB(srv.cmd.Process.Pid))
	if err != nil {
		return 0, 0, 0, err
	}
	ok := 0
	for _, oc := range outs {
		if oc != failed {
			ok++
		}
	}
	return float64(ok) / took.Seconds(), peak, 1000 * cpu / float64(max(ok, 1)), nil
}

// list formats rates as "412.3, 398.1, 420.7".
func list(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, ", ")
}

func median(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	if len(c) == 0 {
		return 0
	}
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func peerNames(peers []peer) string {
	var b strings.Builder
	for _, p := range peers {
		b.WriteString(p.name() + " | ")
	}
	return b.String()
}

func dirSize(dir string) string {
	var n int64
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "?"
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return fmt.Sprintf("%.2f MB", float64(n)/(1<<20))
}

// redisMemory asks the peers' redis (rspamd's Bayes store) for its memory.
func redisMemory() string {
	c := exec.Command("redis-cli", "-p", "6479", "info", "memory")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = c.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "used_memory_human:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
