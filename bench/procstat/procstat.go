// Package procstat reads a server's cost from /proc for the load tools in
// bench/: CPU, bytes written and memory of a process tree.
package procstat

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server-side cost, read from /proc for the server's root processes
// (pimail's PID; Postfix's and Dovecot's master PIDs) and all their live
// descendants. CPU counts utime+stime of each live process plus
// cutime+cstime, the CPU of children it has already reaped, so work done
// by short-lived helpers (Postfix's smtpd, cleanup, lmtp; Dovecot's lmtp)
// is counted. write_bytes from /proc/PID/io is summed the same way: the
// kernel adds a reaped child's I/O counters to its parent's.

// Usage is one sample of a process tree.
type Usage struct {
	CPU   float64 // seconds
	Write int64   // bytes
	RSS   int64   // bytes (RSS, or PSS when asked), summed over live processes
	Procs int
}

var clkTck = 100.0 // USER_HZ on Linux

// Sample sums usage over roots and their descendants.
func Sample(roots []int, withPSS bool) (Usage, error) {
	parent, err := parents()
	if err != nil {
		return Usage{}, err
	}
	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}
	// Descendants: repeat until no process is added (trees are shallow).
	for changed := true; changed; {
		changed = false
		for pid, pp := range parent {
			if !in[pid] && in[pp] {
				in[pid], changed = true, true
			}
		}
	}
	var u Usage
	for pid := range in {
		cpu, rss, err := statOf(pid)
		if err != nil {
			continue // exited meanwhile: its parent will count it
		}
		if withPSS {
			if pss, ok := pssOf(pid); ok {
				rss = pss
			}
		}
		u.CPU += cpu
		u.RSS += rss
		u.Write += writeBytes(pid)
		u.Procs++
	}
	return u, nil
}

// parents maps every PID to its parent.
func parents() (map[int]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	out := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := statFields(pid)
		if err != nil {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			out[pid] = pp
		}
	}
	return out, nil
}

// statFields returns /proc/PID/stat's fields after the command name:
// [0] is state (field 3 of proc(5)), [1] ppid, [11] utime, [12] stime,
// [13] cutime, [14] cstime, [21] rss in pages.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, fmt.Errorf("stat %d: %w", pid, err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("stat %d: malformed", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return nil, fmt.Errorf("stat %d: short", pid)
	}
	return f, nil
}

func statOf(pid int) (cpu float64, rss int64, err error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[k], 10, 64)
		ticks += v
	}
	pages, _ := strconv.ParseInt(f[21], 10, 64)
	return float64(ticks) / clkTck, pages * int64(os.Getpagesize()), nil
}

// pssOf reads the proportional set size (shared pages divided among the
// processes that map them), so that summing over Postfix's and Dovecot's
// many processes does not count their shared libraries many times.
func pssOf(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

func writeBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Watch samples a tree every 250 ms and keeps the peak of the summed
// PSS.
type Watch struct {
	roots []int
	mu    sync.Mutex
	peak  int64
	first Usage
}

func StartWatch(ctx context.Context, roots []int) (*Watch, error) {
	u, err := Sample(roots, true)
	if err != nil {
		return nil, err
	}
	p := &Watch{roots: roots, first: u, peak: u.RSS}
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if u, err := Sample(roots, true); err == nil {
					p.mu.Lock()
					p.peak = max(p.peak, u.RSS)
					p.mu.Unlock()
				}
			}
		}
	}()
	return p, nil
}

// Delta returns the cost since the start and the peak summed RSS.
func (p *Watch) Delta() (cpu float64, write, peak int64, procs int, err error) {
	u, err := Sample(p.roots, true)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peak = max(p.peak, u.RSS)
	return u.CPU - p.first.CPU, u.Write - p.first.Write, p.peak, u.Procs, nil
}

// Settle waits, at most limit, until the tree has used at most one clock
// tick (10 ms, 2 % of a core) in every half second for quiet, and returns how long the work went
// on after the load ended. Postfix keeps delivering from its queue after
// the SMTP side has accepted everything; pimail indexes new messages in
// the background (small batches up to 5 s later) and checkpoints its WAL
// when writes pause. That work belongs to the run, and must not spill into
// the next one.
func Settle(roots []int, limit, quiet time.Duration) time.Duration {
	start := time.Now()
	prev, err := Sample(roots, false)
	if err != nil {
		return 0
	}
	busy := start
	for time.Since(start) < limit {
		time.Sleep(500 * time.Millisecond)
		u, err := Sample(roots, false)
		if err != nil {
			return time.Since(start)
		}
		// One tick is what an idle server's timers cost (pimail's
		// directory poll ticks every few seconds); more is work.
		if u.CPU-prev.CPU > 0.015 {
			busy = time.Now()
		} else if time.Since(busy) >= quiet {
			return busy.Sub(start)
		}
		prev = u
	}
	return time.Since(start)
}
