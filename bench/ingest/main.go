// Command ingest is pimail's SMTP ingest benchmark: it sends N messages of
// SIZE bytes over CONNS concurrent SMTP connections (each connection sends
// many messages, with RSET between them) and reports accepted messages per
// second, the latency from MAIL FROM to the final 250 (p50, p99, max) and
// the errors.
//
//	go run ./bench/ingest -smtp 127.0.0.1:2525 -n 1000 -size 8192 -conns 10 -rcpt me@localhost
//
// Every loop is bounded: at most N messages, at most -timeout in all, at
// most -reconnects new connections per worker after an error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

type config struct {
	addr       string
	n          int
	size       int
	conns      int
	rcpts      []string
	from       string
	timeout    time.Duration
	ioTimeout  time.Duration
	reconnects int
}

func main() {
	var cfg config
	var rcpts string
	flag.StringVar(&cfg.addr, "smtp", "127.0.0.1:2525", "SMTP server address")
	flag.IntVar(&cfg.n, "n", 1000, "number of messages")
	flag.IntVar(&cfg.size, "size", 8192, "message size in bytes")
	flag.IntVar(&cfg.conns, "conns", 10, "concurrent SMTP connections")
	flag.StringVar(&rcpts, "rcpt", "me@localhost", "recipients of every message, comma-separated")
	flag.StringVar(&cfg.from, "from", "bench@example.org", "envelope sender")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "stop after this long in all")
	flag.DurationVar(&cfg.ioTimeout, "io-timeout", time.Minute, "deadline for each SMTP reply")
	flag.IntVar(&cfg.reconnects, "reconnects", 5, "new connections a worker may open after errors")
	flag.Parse()
	for _, r := range strings.Split(rcpts, ",") {
		if r = strings.TrimSpace(r); r != "" {
			cfg.rcpts = append(cfg.rcpts, r)
		}
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		flag.Usage()
		os.Exit(2)
	}
	res := run(cfg)
	res.print(os.Stdout, cfg)
	if res.accepted < cfg.n {
		os.Exit(1)
	}
}

func (c config) check() error {
	switch {
	case c.n <= 0:
		return fmt.Errorf("-n must be positive")
	case c.size < 256:
		return fmt.Errorf("-size must be at least 256")
	case c.conns <= 0:
		return fmt.Errorf("-conns must be positive")
	case len(c.rcpts) == 0:
		return fmt.Errorf("-rcpt is empty")
	case c.timeout <= 0 || c.ioTimeout <= 0:
		return fmt.Errorf("timeouts must be positive")
	}
	return nil
}

// run sends the messages and collects the results of all workers.
func run(cfg config) *results {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	body := makeBody(cfg.size)
	next := make(chan int, cfg.n)
	for i := range cfg.n {
		next <- i
	}
	close(next)
	res := &results{}
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(ctx, cfg, w, body, next, res)
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}
