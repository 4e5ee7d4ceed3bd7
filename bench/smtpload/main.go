// Command smtpload is a load generator for any SMTP server, with an IMAP
// watcher that measures when each message becomes visible in its
// recipient's INBOX, and /proc sampling of the server's processes.
//
//	smtpload -smtp 127.0.0.1:2025 -users user1@bench.test -conns 50 -duration 20s
//	smtpload -smtp ... -imap 127.0.0.1:2143 -imap-pass benchpass -watch -n 50 -interval 1s
//	smtpload -smtp ... -bounces 0.9 -per-conn 1 -pids 1234,5678
//	smtpload compare results.jsonl       # ratio table of labelled runs
//
// Load shapes: a closed loop of -conns connections, bounded by -duration
// and/or -n messages; a burst (-n with -conns, no -duration); pacing
// (-interval: job i starts at i*interval). Each job is a good message
// (to -rcpts valid users, rotating over -users), a bounce (the same
// number of unknown users; the server must answer 5xx at RCPT) with
// probability -bounces, or an unfinished session (EHLO then QUIT, or a
// hang-up after RCPT) with probability -unfinished. -per-conn 1 opens a
// connection per transaction; 0 keeps connections open.
//
// Every loop is bounded: by -n, by -duration, by -timeout in all, and the
// wait for visibility by -wait. One JSON line per run goes to standard
// output (or -json FILE, appended), then a readable summary.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"pimail/bench/procstat"
)

type config struct {
	label        string
	smtpAddr     string
	helo         string
	from         string
	users        []string
	bounceDomain string
	conns        int
	n            int
	duration     time.Duration
	interval     time.Duration
	perConn      int
	size         int
	bdat         bool
	rcptsPer     int
	bounces      float64
	unfinished   float64
	seed         uint64
	ioTimeout    time.Duration
	timeout      time.Duration
	corpus       string
	runID        string

	imapAddr string
	imapPass string
	watch    bool
	imapPoll time.Duration
	wait     time.Duration

	pids      []int
	idleFirst time.Duration
	settleMax time.Duration
	quiet     time.Duration
	jsonFile  string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "compare" {
		if err := compare(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "smtpload compare:", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "smtpload:", err)
		os.Exit(2)
	}
	rep, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "smtpload:", err)
		os.Exit(1)
	}
	if err := rep.emit(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "smtpload:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("smtpload", flag.ContinueOnError)
	var users, pids string
	fs.StringVar(&cfg.label, "label", "", "name of this run in the JSON line (e.g. pimail/closed-50)")
	fs.StringVar(&cfg.smtpAddr, "smtp", "127.0.0.1:2525", "SMTP server address")
	fs.StringVar(&cfg.helo, "helo", "client.bench.test", "EHLO name")
	fs.StringVar(&cfg.from, "from", "sender@sender.test", "envelope and header sender")
	fs.StringVar(&users, "users", "user1@bench.test", "valid recipients, comma-separated; messages rotate over them")
	fs.StringVar(&cfg.bounceDomain, "bounce-domain", "", "domain of the unknown users of bounces (default: the first user's)")
	fs.IntVar(&cfg.conns, "conns", 10, "concurrent connections (workers)")
	fs.IntVar(&cfg.n, "n", 0, "jobs in all (0: until -duration)")
	fs.DurationVar(&cfg.duration, "duration", 0, "stop starting jobs after this long (0: until -n)")
	fs.DurationVar(&cfg.interval, "interval", 0, "start job i at i*interval (0: as fast as the workers go)")
	fs.IntVar(&cfg.perConn, "per-conn", 0, "transactions per connection (0: keep connections open)")
	fs.IntVar(&cfg.size, "size", 8192, "message size in bytes")
	fs.BoolVar(&cfg.bdat, "bdat", false, "send each message as one BDAT chunk (RFC 3030 CHUNKING) instead of DATA")
	fs.IntVar(&cfg.rcptsPer, "rcpts", 1, "recipients per message")
	fs.Float64Var(&cfg.bounces, "bounces", 0, "fraction of transactions addressed to unknown users")
	fs.Float64Var(&cfg.unfinished, "unfinished", 0, "fraction of sessions that end before DATA")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the job mix")
	fs.DurationVar(&cfg.ioTimeout, "io-timeout", 2*time.Minute, "deadline of each SMTP exchange")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "hard limit on the whole run")
	fs.StringVar(&cfg.corpus, "corpus", "", "directory of .eml files whose bodies fill messages (default: generated text)")
	fs.StringVar(&cfg.runID, "run-id", "", "unique tag in Message-IDs (default: from the clock)")
	fs.StringVar(&cfg.imapAddr, "imap", "", "IMAP server for visibility (plain text LOGIN)")
	fs.StringVar(&cfg.imapPass, "imap-pass", "", "password of every watched user")
	fs.BoolVar(&cfg.watch, "watch", false, "watch every user's INBOX and measure end-to-end latency")
	fs.DurationVar(&cfg.imapPoll, "imap-poll", 10*time.Millisecond, "NOOP interval of the watchers (0: use IDLE)")
	fs.DurationVar(&cfg.wait, "wait", 2*time.Minute, "how long to wait for accepted messages to become visible")
	fs.StringVar(&pids, "pids", "", "server PIDs (comma-separated) whose process trees are measured")
	fs.DurationVar(&cfg.idleFirst, "idle-first", 0, "before sending, wait at most this long for the server to go idle (work left over from an earlier run)")
	fs.DurationVar(&cfg.settleMax, "settle", 0, "after sending, wait at most this long for the server to go idle before reading its CPU")
	fs.DurationVar(&cfg.quiet, "settle-quiet", 6*time.Second, "how long the server must stay idle for -settle and -idle-first (pimail defers up to 5 s of indexing)")
	fs.StringVar(&cfg.jsonFile, "json", "", "append the JSON line to this file too")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, u := range strings.Split(users, ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.users = append(cfg.users, u)
		}
	}
	for _, p := range strings.Split(pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("-pids: %w", err)
		}
		cfg.pids = append(cfg.pids, n)
	}
	if cfg.runID == "" {
		cfg.runID = strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	}
	if cfg.bounceDomain == "" && len(cfg.users) > 0 {
		if _, d, ok := strings.Cut(cfg.users[0], "@"); ok {
			cfg.bounceDomain = d
		}
	}
	return cfg, cfg.check()
}

func (cfg *config) check() error {
	switch {
	case len(cfg.users) == 0:
		return fmt.Errorf("-users: no recipients")
	case cfg.conns < 1:
		return fmt.Errorf("-conns must be at least 1")
	case cfg.n <= 0 && cfg.duration <= 0:
		return fmt.Errorf("bound the run with -n or -duration")
	case cfg.rcptsPer < 1 || cfg.rcptsPer > len(cfg.users) && cfg.bounces < 1:
		return fmt.Errorf("-rcpts must be between 1 and the number of -users")
	case cfg.size < 512:
		return fmt.Errorf("-size must be at least 512")
	case cfg.watch && (cfg.imapAddr == "" || cfg.imapPass == ""):
		return fmt.Errorf("-watch needs -imap and -imap-pass")
	case cfg.bounces < 0 || cfg.bounces > 1 || cfg.unfinished < 0 || cfg.unfinished > 1:
		return fmt.Errorf("-bounces and -unfinished are fractions")
	}
	return nil
}

// run does one measured run.
func run(cfg *config) (*report, error) {
	text, err := loadText(cfg.corpus, 2<<20)
	if err != nil {
		return nil, err
	}
	// Before the watchers log in, whose polls keep a server busy.
	var busyBefore time.Duration
	if len(cfg.pids) > 0 && cfg.idleFirst > 0 {
		busyBefore = procstat.Settle(cfg.pids, cfg.idleFirst, cfg.quiet)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	res := newResults()

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := map[string]bool{}
	watchErr := make(chan error, len(cfg.users))
	if cfg.watch {
		for _, u := range cfg.users {
			w := newWatcher(cfg, u, res)
			if err := w.start(); err != nil {
				return nil, err
			}
			watched[u] = true
			go func() { watchErr <- w.run(watchCtx) }()
		}
	}

	var pw *procstat.Watch
	if len(cfg.pids) > 0 {
		if pw, err = procstat.StartWatch(watchCtx, cfg.pids); err != nil {
			return nil, err
		}
	}

	loadCtx := ctx
	if cfg.duration > 0 {
		var c context.CancelFunc
		loadCtx, c = context.WithTimeout(ctx, cfg.duration)
		defer c()
	}
	cpu0 := selfCPU()
	t0 := time.Now()
	runLoad(loadCtx, cfg, text, res)
	sent := time.Since(t0)

	rep := &report{sendTime: sent, clientCPU0: cpu0, busyBefore: busyBefore}
	if cfg.watch {
		deadline := time.Now().Add(cfg.wait)
		for res.unseen(watched) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		rep.unseen = res.unseen(watched)
	}
	if pw != nil && cfg.settleMax > 0 {
		rep.settled = procstat.Settle(cfg.pids, cfg.settleMax, cfg.quiet)
	}
	if pw != nil {
		rep.cpu, rep.written, rep.peakRSS, rep.procs, err = pw.Delta()
		if err != nil {
			return nil, err
		}
	}
	stopWatch()
	for range watched {
		if err := <-watchErr; err != nil {
			res.mu.Lock()
			res.noteErr(err)
			res.mu.Unlock()
		}
	}
	rep.fill(cfg, res, t0)
	return rep, nil
}
