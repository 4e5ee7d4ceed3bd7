package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// jobKind is what one unit of work does.
type jobKind int

const (
	jobGood       jobKind = iota // a message to valid recipients
	jobBounce                    // a transaction to unknown recipients only
	jobUnfinished                // connect, EHLO, then quit or hang up
)

// kindOf decides, from the seed and the job's number only (so both
// servers of a comparison get the same mix), what job seq is.
func (cfg *config) kindOf(seq int) (jobKind, bool) {
	r := rand.New(rand.NewPCG(cfg.seed, uint64(seq)))
	u, b, h := r.Float64(), r.Float64(), r.IntN(2) == 0
	switch {
	case u < cfg.unfinished:
		return jobUnfinished, h
	case b < cfg.bounces:
		return jobBounce, false
	}
	return jobGood, false
}

// recipients of good job seq: rcptsPer distinct addresses of the pool,
// rotating; of a bounce: as many unknown users.
func (cfg *config) recipients(seq int, kind jobKind) []string {
	n := cfg.rcptsPer
	out := make([]string, 0, n)
	for i := range n {
		if kind == jobBounce {
			out = append(out, fmt.Sprintf("nobody-%d-%d@%s", seq, i, cfg.bounceDomain))
			continue
		}
		out = append(out, cfg.users[(seq*n+i)%len(cfg.users)])
	}
	return out
}

// schedule hands out job numbers: as fast as workers take them (closed
// loop, burst) or one every interval (paced). It stops after n jobs
// (when n > 0) or when ctx ends.
func schedule(ctx context.Context, cfg *config, start time.Time) <-chan int {
	ch := make(chan int)
	go func() {
		defer close(ch)
		for seq := 0; cfg.n <= 0 || seq < cfg.n; seq++ {
			if cfg.interval > 0 {
				t := time.NewTimer(time.Until(start.Add(time.Duration(seq) * cfg.interval)))
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			select {
			case <-ctx.Done():
				return
			case ch <- seq:
			}
		}
	}()
	return ch
}

// runLoad runs the workers until the schedule ends and returns when every
// worker has finished its last job.
func runLoad(ctx context.Context, cfg *config, text *textSource, res *results) {
	jobs := schedule(ctx, cfg, time.Now())
	var wg sync.WaitGroup
	for range cfg.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(cfg, text, jobs, res)
		}()
	}
	wg.Wait()
}

// worker takes jobs until the channel closes, keeping its connection for
// up to cfg.perConn transactions (0: for ever).
func worker(cfg *config, text *textSource, jobs <-chan int, res *results) {
	var k *conn
	defer func() {
		if k != nil {
			k.quit()
		}
	}()
	for seq := range jobs {
		kind, hangUp := cfg.kindOf(seq)
		t0 := time.Now()
		if k == nil {
			var err error
			if k, err = dial(cfg); err != nil {
				res.connError(err)
				time.Sleep(20 * time.Millisecond) // a refusing server is not spun on
				continue
			}
		}
		rcpts := cfg.recipients(seq, kind)
		var out outcome
		var err error
		switch kind {
		case jobUnfinished:
			err = k.unfinished(cfg, cfg.users[seq%len(cfg.users)], hangUp)
			k = nil
			res.unfinishedDone(err)
			continue
		case jobBounce:
			out, err = k.sendBounce(cfg, rcpts)
		default:
			msg := text.buildMessage(cfg.runID, seq, cfg.size, cfg.from, rcpts)
			res.started(seq, t0, rcpts[0])
			out, err = k.sendGood(cfg, rcpts, msg)
			if out == accepted {
				res.accepted(seq, time.Since(t0), len(msg), len(rcpts))
			}
		}
		res.outcome(out, err)
		k = afterTxn(cfg, k, out)
	}
}

// afterTxn readies the connection for the next transaction, or ends it.
func afterTxn(cfg *config, k *conn, out outcome) *conn {
	if out == brokenSession {
		k.hangUp()
		return nil
	}
	k.txn++
	if cfg.perConn > 0 && k.txn >= cfg.perConn {
		k.quit()
		return nil
	}
	if out != accepted {
		if err := k.reset(cfg); err != nil {
			k.hangUp()
			return nil
		}
	}
	return k
}
