package submission

import (
	"net/netip"
	"sync"
	"time"
)

// throttleWindow is how long failures from an address are remembered.
const throttleWindow = 15 * time.Minute

// maxThrottleEntries bounds the addresses tracked.
const maxThrottleEntries = 65536

// throttle makes every failed login from an address cost more time than
// the one before: base, 2×base, 4×base … up to max. It slows password
// guessing down on top of internal/auth's lockout.
type throttle struct {
	base, max time.Duration
	mu        sync.Mutex
	fails     map[string]*failRecord
}

type failRecord struct {
	n    int
	last time.Time
}

func newThrottle(base, max time.Duration) *throttle {
	return &throttle{base: base, max: max, fails: map[string]*failRecord{}}
}

// key groups IPv6 addresses by /64, like internal/auth.
func throttleKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.Unmap().String()
}

// fail records a failure and returns how long to wait before answering.
func (t *throttle) fail(ip string, now time.Time) time.Duration {
	k := throttleKey(ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.fails[k]
	if r == nil || now.Sub(r.last) > throttleWindow {
		if len(t.fails) >= maxThrottleEntries {
			t.evict(now)
		}
		r = &failRecord{}
		t.fails[k] = r
	}
	r.n++
	r.last = now
	d := t.base
	for i := 1; i < r.n && d < t.max; i++ {
		d *= 2
	}
	return min(d, t.max)
}

// evict drops stale entries, then arbitrary ones down to 90 %. Called
// with mu held.
func (t *throttle) evict(now time.Time) {
	for k, r := range t.fails {
		if now.Sub(r.last) > throttleWindow {
			delete(t.fails, k)
		}
	}
	for k := range t.fails {
		if len(t.fails) < maxThrottleEntries*9/10 {
			break
		}
		delete(t.fails, k)
	}
}
