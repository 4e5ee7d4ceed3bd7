package smtpd

import (
	"net/netip"
	"sync"
	"time"
)

// maxTrackedClients bounds the rate limiter's memory. Beyond it, clients
// not already tracked are not rate limited (the concurrency limits still
// hold); a sweep forgets idle clients once per window.
const maxTrackedClients = 100_000

// clientKey is the unit the per-client limits count: an IPv4 address, or
// the /64 of an IPv6 address (one subscriber line holds a whole /64, so
// counting single IPv6 addresses would not limit anything).
func clientKey(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.PrefixFrom(ip, ip.BitLen())
}

// admission is why a connection was refused, or admitted.
type admission int

const (
	admitted admission = iota
	overTotal
	overPerClient
	overRate
)

// limiter counts open connections in total and per client, and
// connection attempts per client in a sliding window (a token bucket:
// rate tokens per window, refilled continuously).
type limiter struct {
	maxTotal, maxPerClient, rate int // <= 0: no limit
	window                       time.Duration
	now                          func() time.Time

	mu        sync.Mutex
	total     int
	open      map[netip.Prefix]int
	buckets   map[netip.Prefix]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(maxTotal, maxPerClient, rate int, window time.Duration) *limiter {
	return &limiter{
		maxTotal: maxTotal, maxPerClient: maxPerClient, rate: rate, window: window, now: time.Now,
		open: map[netip.Prefix]int{}, buckets: map[netip.Prefix]*bucket{},
	}
}

// acquire admits a new connection from key and counts it open, or says
// which limit refuses it. Every attempt spends a rate token, refused ones
// too, so a client hammering the port stays refused.
// An exempt client is held only to the total limit.
func (l *limiter) acquire(key netip.Prefix, exempt bool) admission {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !exempt && !l.takeToken(key) {
		return overRate
	}
	if l.maxTotal > 0 && l.total >= l.maxTotal {
		return overTotal
	}
	if !exempt && l.maxPerClient > 0 && l.open[key] >= l.maxPerClient {
		return overPerClient
	}
	l.total++
	l.open[key]++
	return admitted
}

// release counts a connection from key closed.
func (l *limiter) release(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if n := l.open[key]; n <= 1 {
		delete(l.open, key)
	} else {
		l.open[key] = n - 1
	}
}

// active returns the number of open connections.
func (l *limiter) active() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// takeToken spends one of key's rate tokens; false when none is left.
func (l *limiter) takeToken(key netip.Prefix) bool {
	if l.rate <= 0 {
		return true
	}
	now := l.now()
	perSecond := float64(l.rate) / l.window.Seconds()
	if now.Sub(l.lastSweep) >= l.window {
		l.sweep(now, perSecond)
	}
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxTrackedClients {
			return true
		}
		b = &bucket{tokens: float64(l.rate), last: now}
		l.buckets[key] = b
	}
	b.tokens = min(float64(l.rate), b.tokens+now.Sub(b.last).Seconds()*perSecond)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// sweep forgets clients whose bucket has refilled: they are as if new.
func (l *limiter) sweep(now time.Time, perSecond float64) {
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*perSecond >= float64(l.rate) {
			delete(l.buckets, k)
		}
	}
}
