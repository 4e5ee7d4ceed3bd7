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
// With -multiappend N, the mbox is loaded once more at the end, N messages
// per APPEND command (RFC 3502 MULTIAPPEND), into a second mailbox that is
// deleted afterwards; each message gets an extra header line there, so that
// a server that stores equal messages once (pimail) writes them anew.
// With -peer-addr a second server gets the same mbox and the same queries,
// the runs of the two alternating, and a table with the ratios closes the
// output (bench/run-imapbench.sh --peer dovecot does this with Dovecot).
// The search words, the sender and the date are chosen from the mbox
// deterministically and printed, so another server can be measured with
// the same queries. -compare-fts instead compares FTS5 index layouts on
// the mbox (no server needed).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

type options struct {
	addr, user, pass, mailbox, mbox, dataDir string
	name, peerName, peerAddr, peerUser       string
	peerPass                                 string
	also                                     []string // NAME=HOST:PORT, same login as -addr
	tls, insecure, keep, fresh               bool
	runs, limit, multiAppend, pipeline       int
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
	flag.IntVar(&o.multiAppend, "multiappend", 0, "also time loading the mbox with MULTIAPPEND (RFC 3502), this many messages per command, into a second mailbox after the queries (servers that advertise it)")
	flag.IntVar(&o.pipeline, "pipeline", 0, "also time loading the mbox with APPEND commands sent this many ahead of their responses (LITERAL+, RFC 7888), into a second mailbox after the queries")
	flag.DurationVar(&o.settle, "settle", 0, "wait this long after loading, before measuring")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "timeout per command")
	flag.StringVar(&o.dataDir, "datadir", "", "pimail data directory, to report index size vs mail size")
	flag.StringVar(&o.name, "name", "pimail", "name of the server in the output")
	flag.StringVar(&o.peerAddr, "peer-addr", "", "a second IMAP server (no TLS) measured in the same run, queries interleaved")
	flag.StringVar(&o.peerUser, "peer-user", "", "login user on the second server")
	flag.StringVar(&o.peerPass, "peer-pass", "", "password on the second server")
	flag.StringVar(&o.peerName, "peer-name", "peer", "name of the second server in the output")
	flag.Func("also", "another server with the login of -addr, NAME=HOST:PORT (repeatable): pimail on another store, measured in the same run", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("want NAME=HOST:PORT")
		}
		o.also = append(o.also, v)
		return nil
	})
	flag.BoolVar(&o.fresh, "fresh", false, "delete the benchmark mailbox first if it exists")
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

// reportSizes prints the size of pimail's full-text index beside the
// size of the mail loaded (mailBytes: messages up to 128 KiB are kept in
// pimail.db, not in files, so the files are no measure of it).
func reportSizes(dir string, mailBytes int64) {
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
	fmt.Printf("\npimail data: mail loaded %.1f MB; message files %.1f MB, pimail.db %.1f MB (with its WAL), index.db %.1f MB (%.0f %% of the mail)\n",
		mb(mailBytes), mb(blobs), mb(db), mb(idx), 100*float64(idx)/float64(max(mailBytes, 1)))
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
