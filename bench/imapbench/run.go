package main

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// target is one IMAP server under measurement.
type target struct {
	name, addr, user, pass string
	mailbox                string
	tls, insecure, keep    bool
	c                      *client
	appendRate             float64 // msgs/s of the load, one message per APPEND
}

// query is one timed command.
type query struct{ name, cmd string }

// result is what one query took on one target.
type result struct {
	cold, median time.Duration
	matches      string
	bytes        int64
}

func run(o options, msgs [][]byte) error {
	ch := chooseQueries(msgs)
	fmt.Printf("mbox %s: %d messages, %.1f MB\n", filepath.Base(o.mbox), len(msgs), mb(totalSize(msgs)))
	fmt.Printf("rare word   %q in %d messages (%.2f %%)\n", ch.rare, ch.rareDF, pct(ch.rareDF, len(msgs)))
	fmt.Printf("common word %q in %d messages (%.2f %%)\n", ch.common, ch.commonDF, pct(ch.commonDF, len(msgs)))
	fmt.Printf("sender      %q on %d messages\n", ch.sender, ch.senderN)
	fmt.Printf("date        %s: %d messages\n", ch.day.Format("2-Jan-2006"), ch.dayN)

	targets := []*target{{name: o.name, addr: o.addr, user: o.user, pass: o.pass, tls: o.tls, insecure: o.insecure, keep: o.keep}}
	for _, a := range o.also {
		name, addr, _ := strings.Cut(a, "=")
		targets = append(targets, &target{name: name, addr: addr, user: o.user, pass: o.pass, keep: o.keep})
	}
	if o.peerAddr != "" {
		targets = append(targets, &target{name: o.peerName, addr: o.peerAddr, user: o.peerUser, pass: o.peerPass})
	}
	for _, t := range targets {
		if err := t.load(o, msgs); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		defer t.finish()
	}
	if o.settle > 0 {
		time.Sleep(o.settle)
	}

	queries := []query{
		{"UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE)", "UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE)"},
		{"UID FETCH 1:* (BODY.PEEK[HEADER])", "UID FETCH 1:* (BODY.PEEK[HEADER])"},
		{"UID SEARCH TEXT " + ch.rare + " (rare)", "UID SEARCH TEXT " + quote(ch.rare)},
		{"UID SEARCH TEXT " + ch.common + " (common)", "UID SEARCH TEXT " + quote(ch.common)},
		{"UID SEARCH FROM " + ch.sender, "UID SEARCH FROM " + quote(ch.sender)},
		{"UID SEARCH ON " + ch.day.Format("2-Jan-2006"), "UID SEARCH ON " + ch.day.Format("2-Jan-2006")},
	}
	results := make([][]result, len(queries)) // [query][target]
	for qi, q := range queries {
		rs, err := measure(targets, q, o.runs)
		if err != nil {
			return err
		}
		results[qi] = rs
		for ti, t := range targets {
			r := rs[ti]
			fmt.Printf("%-10s %-55s cold %9.1f ms  median %9.1f ms  matches %6s  bytes %10d\n",
				t.name, q.name, ms(r.cold), ms(r.median), r.matches, r.bytes)
		}
	}

	// Expunge 1 %, then 20 % of what is left, chosen at random (seeded),
	// the same share on every target.
	expNames := []string{}
	expRes := [][]result{}
	for ti, t := range targets {
		rs, names, err := t.expunges()
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		for i, r := range rs {
			if ti == 0 {
				expNames = append(expNames, names[i])
				expRes = append(expRes, make([]result, len(targets)))
			}
			expRes[i][ti] = r
			fmt.Printf("%-10s %-55s once %9.1f ms  matches %6s  bytes %10d\n", t.name, names[i], ms(r.cold), r.matches, r.bytes)
		}
	}
	for i := range queries {
		expNames = slices.Insert(expNames, i, queries[i].name)
	}
	if o.dataDir != "" { // before the batched load adds (and deletes) a mailbox
		reportSizes(o.dataDir, totalSize(msgs))
	}
	// The pipelined and batched loads last: nothing measured comes after them.
	pipeRates := make([]float64, len(targets))
	multiRates := make([]float64, len(targets))
	for ti, t := range targets {
		if o.pipeline > 0 {
			r, err := t.loadPipelined(o, msgs)
			if err != nil { // reported; the tables still follow
				fmt.Printf("%s: the pipelined load failed: %v\n", t.name, err)
			}
			pipeRates[ti] = r
		}
		if o.multiAppend > 0 {
			r, err := t.loadMulti(o, msgs)
			if err != nil {
				fmt.Printf("%s: the MULTIAPPEND load failed: %v\n", t.name, err)
			}
			multiRates[ti] = r
		}
	}
	printTable(targets, expNames, append(results, expRes...))
	printLoadTable(targets, o, pipeRates, multiRates)
	return nil
}

// load connects, creates the benchmark mailbox and APPENDs the messages.
func (t *target) load(o options, msgs [][]byte) error {
	c, err := dial(t.addr, t.tls, t.insecure, o.timeout)
	if err != nil {
		return err
	}
	t.c, t.mailbox = c, o.mailbox
	if err := c.login(t.user, t.pass); err != nil {
		return err
	}
	if o.fresh {
		if _, err := c.cmd("DELETE %s", quote(o.mailbox)); err == nil {
			slog.Info("deleted an existing benchmark mailbox", "server", t.name, "mailbox", o.mailbox)
		}
	}
	if _, err := c.cmd("CREATE %s", quote(o.mailbox)); err != nil {
		slog.Info("CREATE failed (mailbox exists?)", "server", t.name, "err", err)
	}
	res, err := c.cmd("SELECT %s", quote(o.mailbox))
	if err != nil {
		return err
	}
	for _, l := range res.untagged {
		if strings.HasSuffix(l, " EXISTS") && l != "* 0 EXISTS" {
			return fmt.Errorf("mailbox %s is not empty (%s); choose another with -mailbox or use -fresh", o.mailbox, l)
		}
	}
	start := time.Now()
	for i, m := range msgs {
		if err := c.appendMsg(o.mailbox, messageDate(m), m); err != nil {
			return fmt.Errorf("append message %d: %w", i+1, err)
		}
	}
	el := time.Since(start)
	t.appendRate = float64(len(msgs)) / el.Seconds()
	fmt.Printf("%s: APPEND %d messages: %.1f s, %.0f msgs/s (one connection, one message per command)\n",
		t.name, len(msgs), el.Seconds(), t.appendRate)
	_, err = c.cmd("NOOP")
	return err
}

// multiLoadHeader is prepended to every message of the MULTIAPPEND load, so
// that its messages differ from those already loaded.
const multiLoadHeader = "X-Imapbench-Load: multiappend\r\n"

// loadMulti APPENDs the messages again, batch per MULTIAPPEND command
// (RFC 3502), into mailbox+"-multi", then deletes that mailbox. It returns
// the rate, or 0 when the server does not advertise MULTIAPPEND.
func (t *target) loadMulti(o options, msgs [][]byte) (float64, error) {
	c := t.c
	if !c.multiAppend {
		fmt.Printf("%s: no MULTIAPPEND capability; the batched load is skipped\n", t.name)
		return 0, nil
	}
	mbox := o.mailbox + "-multi" // Dovecot refuses "." in names (its separator)
	if err := c.recreate(mbox); err != nil {
		return 0, err
	}
	batch := o.multiAppend
	start := time.Now()
	for lo := 0; lo < len(msgs); lo += batch {
		hi := min(lo+batch, len(msgs))
		dates := make([]time.Time, 0, hi-lo)
		part := make([][]byte, 0, hi-lo)
		for _, m := range msgs[lo:hi] {
			dates = append(dates, messageDate(m))
			part = append(part, append([]byte(multiLoadHeader), m...))
		}
		if err := c.appendMulti(mbox, dates, part); err != nil {
			return 0, fmt.Errorf("MULTIAPPEND of messages %d-%d: %w", lo+1, hi, err)
		}
	}
	el := time.Since(start)
	rate := float64(len(msgs)) / el.Seconds()
	fmt.Printf("%s: MULTIAPPEND %d messages, %d per command: %.1f s, %.0f msgs/s (one connection)\n",
		t.name, len(msgs), batch, el.Seconds(), rate)
	if _, err := c.cmd("DELETE %s", quote(mbox)); err != nil {
		slog.Warn("deleting the MULTIAPPEND mailbox", "server", t.name, "err", err)
	}
	return rate, nil
}

// pipelineLoadHeader is prepended to every message of the pipelined load.
const pipelineLoadHeader = "X-Imapbench-Load: pipeline\r\n"

// loadPipelined APPENDs the messages again into mailbox+"-pipe", one
// message per command, keeping up to o.pipeline commands sent ahead of
// their responses (as mbsync and other synchronisers pipeline, with LITERAL+,
// RFC 7888), then deletes that mailbox. It returns the rate, or 0 when the
// server does not advertise LITERAL+.
func (t *target) loadPipelined(o options, msgs [][]byte) (float64, error) {
	c := t.c
	if !c.literalPlus {
		fmt.Printf("%s: no LITERAL+ capability; the pipelined load is skipped\n", t.name)
		return 0, nil
	}
	mbox := o.mailbox + "-pipe"
	if err := c.recreate(mbox); err != nil {
		return 0, err
	}
	// Selected, as in the first load (Dovecot opens a mailbox that is not
	// selected for every APPEND, which is slower).
	if _, err := c.cmd("SELECT %s", quote(mbox)); err != nil {
		return 0, err
	}
	var tags []string // sent, not yet answered, oldest first
	start := time.Now()
	for sent, done := 0, 0; done < len(msgs); {
		for ; sent < len(msgs) && sent-done < o.pipeline; sent++ {
			m := msgs[sent]
			tag, err := c.sendAppend(mbox, []time.Time{messageDate(m)}, [][]byte{append([]byte(pipelineLoadHeader), m...)})
			if err != nil {
				return 0, fmt.Errorf("APPEND of message %d: %w", sent+1, err)
			}
			tags = append(tags, tag)
		}
		if err := c.w.Flush(); err != nil {
			return 0, fmt.Errorf("send: %w", err)
		}
		// One response, and those that arrived with it, before the
		// next commands go out in one write.
		for first := true; first || len(tags) > 0 && c.r.Buffered() > 0; first = false {
			if _, err := c.readResponse(tags[0]); err != nil {
				return 0, fmt.Errorf("APPEND of message %d: %w", done+1, err)
			}
			tags = tags[1:]
			done++
		}
	}
	el := time.Since(start)
	rate := float64(len(msgs)) / el.Seconds()
	fmt.Printf("%s: APPEND %d messages, up to %d pipelined: %.1f s, %.0f msgs/s (one connection)\n",
		t.name, len(msgs), o.pipeline, el.Seconds(), rate)
	c.cmd("CLOSE")
	if _, err := c.cmd("DELETE %s", quote(mbox)); err != nil {
		slog.Warn("deleting the pipelined-load mailbox", "server", t.name, "err", err)
	}
	return rate, nil
}

// finish deletes the benchmark mailbox (unless -keep, which only applies
// to the first server) and logs out.
func (t *target) finish() {
	if t.c == nil {
		return
	}
	if !t.keep {
		t.c.cmd("CLOSE")
		if _, err := t.c.cmd("DELETE %s", quote(t.mailbox)); err != nil {
			slog.Warn("deleting the benchmark mailbox", "server", t.name, "err", err)
		}
	}
	t.c.close()
}

// measure runs q once cold on each target, then runs times more,
// alternating between the targets so that both see the same machine load.
func measure(targets []*target, q query, runs int) ([]result, error) {
	times := make([][]time.Duration, len(targets))
	last := make([]response, len(targets))
	for i := 0; i <= runs; i++ {
		for ti, t := range targets {
			t0 := time.Now()
			r, err := t.c.cmd("%s", q.cmd)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", t.name, q.name, err)
			}
			times[ti] = append(times[ti], time.Since(t0))
			last[ti] = r
		}
	}
	out := make([]result, len(targets))
	for ti := range targets {
		m := fmt.Sprint(len(last[ti].untagged))
		if strings.Contains(q.cmd, "SEARCH") {
			m = fmt.Sprint(searchCount(last[ti]))
		}
		out[ti] = result{cold: times[ti][0], median: median(times[ti][1:]), matches: m, bytes: last[ti].bytes}
	}
	return out, nil
}

// expunges flags 1 %, then 20 % of what is left, as \Deleted (seeded
// random choice) and times each EXPUNGE.
func (t *target) expunges() ([]result, []string, error) {
	c := t.c
	all, err := c.cmd("UID SEARCH ALL")
	if err != nil {
		return nil, nil, err
	}
	uids := searchUIDs(all)
	rng := rand.New(rand.NewPCG(3, 2003))
	rng.Shuffle(len(uids), func(i, j int) { uids[i], uids[j] = uids[j], uids[i] })
	var out []result
	var names []string
	for _, share := range []float64{0.01, 0.20} {
		n := int(float64(len(uids))*share + 0.5)
		victims := slices.Clone(uids[:n])
		uids = uids[n:]
		slices.Sort(victims)
		for lo := 0; lo < len(victims); lo += 500 {
			set := make([]string, 0, 500)
			for _, u := range victims[lo:min(lo+500, len(victims))] {
				set = append(set, fmt.Sprint(u))
			}
			if _, err := c.cmd("UID STORE %s +FLAGS.SILENT (\\Deleted)", strings.Join(set, ",")); err != nil {
				return nil, nil, err
			}
		}
		t0 := time.Now()
		r, err := c.cmd("EXPUNGE")
		if err != nil {
			return nil, nil, err
		}
		d := time.Since(t0)
		out = append(out, result{cold: d, median: d, matches: fmt.Sprint(len(r.untagged)), bytes: r.bytes})
		names = append(names, fmt.Sprintf("EXPUNGE %.0f %% (%d messages)", share*100, n))
	}
	return out, names, nil
}

// printTable prints the medians side by side (Markdown) and how many
// times faster the first target is than each other (other / first).
func printTable(targets []*target, names []string, res [][]result) {
	fmt.Println()
	head := "| operation |"
	sep := "|---|"
	for _, t := range targets {
		head += " " + t.name + " ms |"
		sep += "---|"
	}
	for _, t := range targets[1:] {
		head += fmt.Sprintf(" %s / %s |", t.name, targets[0].name)
		sep += "---|"
	}
	head += " matches |"
	sep += "---|"
	fmt.Println(head)
	fmt.Println(sep)
	for i, n := range names {
		line := "| " + n + " |"
		var ms0 []string
		for _, r := range res[i] {
			line += fmt.Sprintf(" %.1f |", ms(r.median))
			ms0 = append(ms0, r.matches)
		}
		for j := 1; j < len(targets); j++ {
			line += fmt.Sprintf(" %.2f× |", float64(res[i][j].median)/float64(max(res[i][0].median, 1)))
		}
		line += " " + strings.Join(ms0, " / ") + " |"
		fmt.Println(line)
	}
}

// printLoadTable prints the load rates (msgs/s) side by side and how many
// times faster the first target is than each other (first / other).
func printLoadTable(targets []*target, o options, pipe, multi []float64) {
	fmt.Println()
	head, sep := "| load, msgs/s (one connection) |", "|---|"
	for _, t := range targets {
		head += " " + t.name + " |"
		sep += "---|"
	}
	for _, t := range targets[1:] {
		head += fmt.Sprintf(" %s / %s |", targets[0].name, t.name)
		sep += "---|"
	}
	fmt.Println(head)
	fmt.Println(sep)
	row := func(name string, rates []float64) {
		line := "| " + name + " |"
		for _, r := range rates {
			line += fmt.Sprintf(" %.0f |", r)
		}
		for _, r := range rates[1:] {
			if r > 0 {
				line += fmt.Sprintf(" %.2f× |", rates[0]/r)
			} else {
				line += " |"
			}
		}
		fmt.Println(line)
	}
	single := make([]float64, len(targets))
	for i, t := range targets {
		single[i] = t.appendRate
	}
	row("APPEND, one message per command", single)
	if o.pipeline > 0 {
		row(fmt.Sprintf("APPEND, one message per command, %d pipelined", o.pipeline), pipe)
	}
	if o.multiAppend > 0 {
		row(fmt.Sprintf("MULTIAPPEND, %d messages per command", o.multiAppend), multi)
	}
}
