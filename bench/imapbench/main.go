// Command imapbench reproduces the IMAP workload of "An Analysis of
// Database-Driven Mail Servers" (Elprin and Parno, LISA '03) against any
// IMAP server: it loads an mbox with APPEND, then times fetching all
// headers, full-text searches for a rare (~1 %) and a common (~25 %) word,
// searches on From and on a date, and expunges of 1 % and 20 %.
//
//	imapbench -addr 127.0.0.1:143 -user me@localhost -pass secret \
//	    -mbox ../shared/corpus/mailbox/mailbox-9k.mbox
//
// Each query runs once cold, then three times; the median is reported.
// The search words, the sender and the date are chosen from the mbox
// deterministically and printed, so another server can be measured with
// the same queries. -compare-fts instead compares FTS5 index layouts on
// the mbox (no server needed).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

type options struct {
	addr, user, pass, mailbox, mbox, dataDir string
	tls, insecure, keep                      bool
	runs, limit                              int
	settle, timeout                          time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:143", "IMAP server host:port")
	flag.StringVar(&o.user, "user", "", "login user")
	flag.StringVar(&o.pass, "pass", "", "login password (or env IMAPBENCH_PASS)")
	flag.BoolVar(&o.tls, "tls", false, "implicit TLS (port 993)")
	flag.BoolVar(&o.insecure, "insecure", false, "skip TLS certificate verification")
	flag.StringVar(&o.mailbox, "mailbox", "imapbench", "mailbox to create, fill and measure")
	flag.BoolVar(&o.keep, "keep", false, "keep the mailbox afterwards (default: delete it)")
	flag.StringVar(&o.mbox, "mbox", "", "mboxrd file to load")
	flag.IntVar(&o.limit, "limit", 0, "load at most this many messages (0: all)")
	flag.IntVar(&o.runs, "runs", 3, "warm runs per query (the median is reported)")
	flag.DurationVar(&o.settle, "settle", 0, "wait this long after loading, before measuring")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "timeout per command")
	flag.StringVar(&o.dataDir, "datadir", "", "pimail data directory, to report index size vs mail size")
	cmp := flag.Bool("compare-fts", false, "compare FTS5 layouts on the mbox and exit (no server)")
	flag.Parse()
	if o.pass == "" {
		o.pass = os.Getenv("IMAPBENCH_PASS")
	}
	if o.mbox == "" {
		fmt.Fprintln(os.Stderr, "imapbench: -mbox is required")
		os.Exit(2)
	}
	msgs, err := readMbox(o.mbox, o.limit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imapbench:", err)
		os.Exit(1)
	}
	if *cmp {
		err = compareFTS(msgs)
	} else {
		err = run(o, msgs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "imapbench:", err)
		os.Exit(1)
	}
}

func run(o options, msgs [][]byte) error {
	ch := chooseQueries(msgs)
	fmt.Printf("mbox %s: %d messages, %.1f MB\n", filepath.Base(o.mbox), len(msgs), mb(totalSize(msgs)))
	fmt.Printf("rare word   %q in %d messages (%.2f %%)\n", ch.rare, ch.rareDF, pct(ch.rareDF, len(msgs)))
	fmt.Printf("common word %q in %d messages (%.2f %%)\n", ch.common, ch.commonDF, pct(ch.commonDF, len(msgs)))
	fmt.Printf("sender      %q on %d messages\n", ch.sender, ch.senderN)
	fmt.Printf("date        %s: %d messages\n", ch.day.Format("2-Jan-2006"), ch.dayN)

	c, err := dial(o.addr, o.tls, o.insecure, o.timeout)
	if err != nil {
		return err
	}
	defer c.close()
	if err := c.login(o.user, o.pass); err != nil {
		return err
	}
	if _, err := c.cmd("CREATE %s", quote(o.mailbox)); err != nil {
		slog.Info("CREATE failed (mailbox exists?)", "err", err)
	}
	res, err := c.cmd("SELECT %s", quote(o.mailbox))
	if err != nil {
		return err
	}
	for _, l := range res.untagged {
		if strings.HasSuffix(l, " EXISTS") && l != "* 0 EXISTS" {
			return fmt.Errorf("mailbox %s is not empty (%s); choose another with -mailbox", o.mailbox, l)
		}
	}
	if !o.keep {
		defer func() {
			c.cmd("CLOSE")
			if _, err := c.cmd("DELETE %s", quote(o.mailbox)); err != nil {
				slog.Warn("deleting the benchmark mailbox", "err", err)
			}
		}()
	}

	// Load.
	start := time.Now()
	for i, m := range msgs {
		if err := c.appendMsg(o.mailbox, messageDate(m), m); err != nil {
			return fmt.Errorf("append message %d: %w", i+1, err)
		}
	}
	el := time.Since(start)
	fmt.Printf("\nAPPEND %d messages: %.1f s, %.0f msgs/s (one connection, one message per command)\n",
		len(msgs), el.Seconds(), float64(len(msgs))/el.Seconds())
	if o.settle > 0 {
		time.Sleep(o.settle)
	}
	if _, err := c.cmd("NOOP"); err != nil {
		return err
	}

	fmt.Printf("\n%-55s %10s %10s %8s %10s\n", "operation", "cold ms", "median ms", "matches", "bytes")
	queries := []struct{ name, cmd string }{
		{"UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE)", "UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE)"},
		{"UID FETCH 1:* (BODY.PEEK[HEADER])", "UID FETCH 1:* (BODY.PEEK[HEADER])"},
		{"UID SEARCH TEXT " + ch.rare + " (rare)", "UID SEARCH TEXT " + quote(ch.rare)},
		{"UID SEARCH TEXT " + ch.common + " (common)", "UID SEARCH TEXT " + quote(ch.common)},
		{"UID SEARCH FROM " + ch.sender, "UID SEARCH FROM " + quote(ch.sender)},
		{"UID SEARCH ON " + ch.day.Format("2-Jan-2006"), "UID SEARCH ON " + ch.day.Format("2-Jan-2006")},
	}
	for _, q := range queries {
		var times []time.Duration
		var last response
		for i := 0; i <= o.runs; i++ {
			t0 := time.Now()
			r, err := c.cmd("%s", q.cmd)
			if err != nil {
				return fmt.Errorf("%s: %w", q.name, err)
			}
			times = append(times, time.Since(t0))
			last = r
		}
		matches := "-"
		if strings.Contains(q.cmd, "SEARCH") {
			matches = fmt.Sprint(searchCount(last))
		} else {
			matches = fmt.Sprint(len(last.untagged))
		}
		fmt.Printf("%-55s %10.1f %10.1f %8s %10d\n", q.name, ms(times[0]), ms(median(times[1:])), matches, last.bytes)
	}

	// Expunge 1 %, then 20 % of what is left, chosen at random (seeded).
	all, err := c.cmd("UID SEARCH ALL")
	if err != nil {
		return err
	}
	uids := searchUIDs(all)
	rng := rand.New(rand.NewPCG(3, 2003))
	rng.Shuffle(len(uids), func(i, j int) { uids[i], uids[j] = uids[j], uids[i] })
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
				return err
			}
		}
		t0 := time.Now()
		r, err := c.cmd("EXPUNGE")
		if err != nil {
			return err
		}
		fmt.Printf("%-55s %10.1f %10s %8d %10d\n", fmt.Sprintf("EXPUNGE %.0f %% (%d messages)", share*100, n), ms(time.Since(t0)), "-", len(r.untagged), r.bytes)
	}
	if o.dataDir != "" {
		reportSizes(o.dataDir)
	}
	return nil
}

// reportSizes prints the size of pimail's full-text index beside the
// size of the message files.
func reportSizes(dir string) {
	size := func(paths ...string) int64 {
		var n int64
		for _, p := range paths {
			filepath.Walk(p, func(_ string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() {
					n += fi.Size()
				}
				return nil
			})
		}
		return n
	}
	idx := size(filepath.Join(dir, "index.db"), filepath.Join(dir, "index.db-wal"))
	blobs := size(filepath.Join(dir, "blobs"))
	db := size(filepath.Join(dir, "pimail.db"), filepath.Join(dir, "pimail.db-wal"))
	fmt.Printf("\npimail data: message files %.1f MB, pimail.db %.1f MB, index.db %.1f MB (%.0f %% of the message files)\n",
		mb(blobs), mb(db), mb(idx), 100*float64(idx)/float64(max(blobs, 1)))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(n, of int) float64 { return 100 * float64(n) / float64(max(of, 1)) }

func totalSize(msgs [][]byte) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(len(m))
	}
	return n
}
