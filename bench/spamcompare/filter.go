package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"pimail/internal/av"
	"pimail/internal/message"
	"pimail/internal/spam"
	"pimail/internal/store/sqlite"
)

// filterRate runs pimail's content filtering alone, in this process, as the
// delivery pipeline runs it after DATA (internal/delivery, runFilters):
// parse the message, the attachment policy, then the spam filter (rules,
// Bayes with the base model trained into data, for the bench account) —
// with conns goroutines for d over raws, the same messages and concurrency
// the peers get. It returns msgs/s and the CPU time per message in ms
// (this process's, which does nothing else meanwhile). This is the
// comparison with spamd and rspamd, which are filters only; smtpRate
// measures pimail as a whole (SMTP, filtering and fsynced storage).
func filterRate(data string, raws [][]byte, conns int, d time.Duration) (float64, float64, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(data, sqlite.Options{Logger: quiet, NoCollect: true})
	if err != nil {
		return 0, 0, fmt.Errorf("open the store with the models: %w", err)
	}
	defer st.Close()
	sf, err := spam.New(spam.Config{Store: st, ReloadInterval: -1, Logger: quiet})
	if err != nil {
		return 0, 0, fmt.Errorf("spam filter: %w", err)
	}
	scanner := av.NewScanner(av.Config{Logger: quiet})
	ctx := context.Background()
	check := func(raw []byte) error {
		parsed := message.Parse(raw)
		if r := scanner.Scan(ctx, raw, parsed); r.Action == av.Defer {
			return fmt.Errorf("attachment policy deferred a message: %s", r.Reason)
		}
		_, err := sf.Check(ctx, spam.Input{Raw: raw, Parsed: parsed, Accounts: []int64{1},
			MailFrom: envelopeFrom(raw), RemoteIP: "192.0.2.1", Helo: "client.example"})
		return err
	}
	for _, raw := range raws { // warm-up: model pages, caches
		if err := check(raw); err != nil {
			return 0, 0, err
		}
	}
	cpu0 := processCPU()
	start := time.Now()
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; time.Since(start) < d; i++ {
				if err := check(raws[i%len(raws)]); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	cpu := processCPU() - cpu0
	if firstErr != nil {
		return 0, 0, firstErr
	}
	n := done.Load()
	return float64(n) / took.Seconds(), 1000 * cpu / float64(max(n, 1)), nil
}

// processCPU is this process's user and system CPU time in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
