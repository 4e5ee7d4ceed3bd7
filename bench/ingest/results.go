package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"
)

// results gathers latencies and errors from all workers.
type results struct {
	mu        sync.Mutex
	latencies []time.Duration
	errs      map[string]int
	nerr      int
	accepted  int
	elapsed   time.Duration
}

func (r *results) ok(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latencies = append(r.latencies, d)
	r.accepted++
}

// maxErrorKinds bounds the distinct error texts kept.
const maxErrorKinds = 20

func (r *results) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errs == nil {
		r.errs = map[string]int{}
	}
	r.nerr++
	if _, ok := r.errs[err.Error()]; ok || len(r.errs) < maxErrorKinds {
		r.errs[err.Error()]++
	}
}

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(sorted)-1))
	return sorted[i]
}

func (r *results) print(w io.Writer, cfg config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lat := slices.Clone(r.latencies)
	slices.Sort(lat)
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "ingest: %d messages of %d bytes to %d recipient(s) over %d connections to %s\n",
		cfg.n, cfg.size, len(cfg.rcpts), cfg.conns, cfg.addr)
	fmt.Fprintf(w, "accepted: %d/%d in %.2fs = %.1f msgs/s (%.2f MB/s)\n",
		r.accepted, cfg.n, secs, float64(r.accepted)/secs, float64(r.accepted*cfg.size)/secs/1e6)
	var maxLat time.Duration
	if len(lat) > 0 {
		maxLat = lat[len(lat)-1]
	}
	fmt.Fprintf(w, "latency MAIL->250: p50 %s  p99 %s  max %s\n",
		ms(percentile(lat, 50)), ms(percentile(lat, 99)), ms(maxLat))
	fmt.Fprintf(w, "errors: %d\n", r.nerr)
	kinds := make([]string, 0, len(r.errs))
	for k := range r.errs {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %dx %s\n", r.errs[k], k)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
