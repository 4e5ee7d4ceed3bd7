package main

import (
	"sort"
	"sync"
	"time"
)

// results collects what the workers and the watcher saw. Safe for
// concurrent use.
type results struct {
	mu          sync.Mutex
	start       map[int]time.Time // good messages: send start
	firstRcpt   map[int]string
	seen        map[int]time.Time // good messages: first seen over IMAP
	acc         map[int]bool      // accepted good messages
	smtpLat     []time.Duration   // accepted: send start -> 250
	bytes       int64             // accepted message bytes
	deliveries  int               // accepted messages x recipients
	nAccepted   int
	nBounced    int
	nBounceMiss int
	nRejected   int
	nBroken     int
	nConnErr    int
	nUnfinished int
	nUnfinErr   int
	errs        map[string]int // error text -> count (at most 20 kinds)
	lastSeen    time.Time
}

func newResults() *results {
	return &results{
		start: map[int]time.Time{}, firstRcpt: map[int]string{},
		seen: map[int]time.Time{}, errs: map[string]int{}, acc: map[int]bool{},
	}
}

func (r *results) noteErr(err error) {
	if err == nil {
		return
	}
	s := err.Error()
	if _, ok := r.errs[s]; ok || len(r.errs) < 20 {
		r.errs[s]++
	}
}

func (r *results) started(seq int, t time.Time, rcpt string) {
	r.mu.Lock()
	r.start[seq], r.firstRcpt[seq] = t, rcpt
	r.mu.Unlock()
}

func (r *results) accepted(seq int, lat time.Duration, size, rcpts int) {
	r.mu.Lock()
	r.acc[seq] = true
	r.smtpLat = append(r.smtpLat, lat)
	r.bytes += int64(size)
	r.deliveries += rcpts
	r.mu.Unlock()
}

func (r *results) outcome(o outcome, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o {
	case accepted:
		r.nAccepted++
	case bounced:
		r.nBounced++
	case bounceMissed:
		r.nBounceMiss++
	case rejected:
		r.nRejected++
	case brokenSession:
		r.nBroken++
	}
	r.noteErr(err)
}

func (r *results) connError(err error) {
	r.mu.Lock()
	r.nConnErr++
	r.noteErr(err)
	r.mu.Unlock()
}

func (r *results) unfinishedDone(err error) {
	r.mu.Lock()
	r.nUnfinished++
	if err != nil {
		r.nUnfinErr++
		r.noteErr(err)
	}
	r.mu.Unlock()
}

// sawMessage records that message seq became visible at t (the first
// sighting counts).
func (r *results) sawMessage(seq int, t time.Time) {
	r.mu.Lock()
	if _, ok := r.seen[seq]; !ok {
		r.seen[seq] = t
		if t.After(r.lastSeen) {
			r.lastSeen = t
		}
	}
	r.mu.Unlock()
}

// unseen counts accepted messages whose first recipient is watched and
// that have not been seen yet.
func (r *results) unseen(watched map[string]bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for seq := range r.acc {
		if _, ok := r.seen[seq]; !ok && watched[r.firstRcpt[seq]] {
			n++
		}
	}
	return n
}

// e2e returns the end-to-end latencies (send start -> seen) of the
// messages seen.
func (r *results) e2e() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for seq, t := range r.seen {
		if s, ok := r.start[seq]; ok {
			out = append(out, t.Sub(s))
		}
	}
	return out
}

// pct returns the p-th percentile (0..100) of d, sorting it in place.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(float64(len(d)-1)*p/100 + 0.5)
	return d[i]
}

func mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(len(d))
}
