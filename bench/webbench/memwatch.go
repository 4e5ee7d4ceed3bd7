package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// memWatch samples, every second for d, the summed PSS and RSS of the
// process trees under the given master PIDs (the Roundcube peer's web tier,
// or Dovecot + Postfix: the services one pimail process replaces) and
// prints the peaks. PSS counts shared pages once across the tree; RSS
// counts them in every process.
// SIGTERM or SIGINT ends the watch early (with the peaks so far).
func memWatch(label string, masters []int, d time.Duration) {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var peakPSS, peakRSS, procs int
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.After(d)
	for {
		pss, rss, n := 0, 0, 0
		for _, p := range treeOf(masters) {
			r, s := memOf(p)
			pss, rss, n = pss+s, rss+r, n+1
		}
		if pss > peakPSS {
			peakPSS, peakRSS, procs = pss, rss, n
		}
		select {
		case <-tick.C:
			continue
		case <-end:
		case <-stop:
		}
		break
	}
	fmt.Printf("%s: peak PSS %d kB (RSS %d kB) in %d processes\n", label, peakPSS, peakRSS, procs)
}

// treeOf lists the masters and all their descendants.
func treeOf(masters []int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	in := map[int]bool{}
	for _, m := range masters {
		if _, ok := parent[m]; ok {
			in[m] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for pid, pp := range parent {
			if !in[pid] && in[pp] {
				in[pid], changed = true, true
			}
		}
	}
	out := make([]int, 0, len(in))
	for p := range in {
		out = append(out, p)
	}
	return out
}
