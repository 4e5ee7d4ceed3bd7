package netserve

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Reasons connLimiter.acquire gives for a refusal.
const (
	overTotalLimit  = "total"
	overClientLimit = "per-address"
	overRateLimit   = "rate"
)

// maxTrackedClients bounds the rate limiter's memory. Beyond it, clients
// not already tracked are not rate limited (the concurrency limits still
// hold); a sweep forgets clients whose bucket has refilled, once per
// window.
const maxTrackedClients = 100_000

// connLimiter counts open connections in total and per client key, and
// new connections per client key in a token bucket: rate tokens per
// window, refilled continuously, so a client may open rate connections
// at once and then one every window/rate.
type connLimiter struct {
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

func newConnLimiter(maxTotal, maxPerClient, rate int, window time.Duration) *connLimiter {
	if window <= 0 {
		window = time.Minute
	}
	return &connLimiter{
		maxTotal: maxTotal, maxPerClient: maxPerClient, rate: rate, window: window, now: time.Now,
		open: map[netip.Prefix]int{}, buckets: map[netip.Prefix]*bucket{},
	}
}

// acquire counts a new connection from key open, or returns which limit
// refuses it. Every attempt of a non-exempt client spends a rate token,
// refused ones too, so a client hammering the port stays refused. An
// exempt client is held only to the total.
func (l *connLimiter) acquire(key netip.Prefix, exempt bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !exempt && !l.takeToken(key) {
		return overRateLimit
	}
	if l.maxTotal > 0 && l.total >= l.maxTotal {
		return overTotalLimit
	}
	if !exempt && l.maxPerClient > 0 && l.open[key] >= l.maxPerClient {
		return overClientLimit
	}
	l.total++
	l.open[key]++
	return ""
}

// release gives back a connection acquire counted.
func (l *connLimiter) release(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if n := l.open[key] - 1; n > 0 {
		l.open[key] = n
	} else {
		delete(l.open, key)
	}
}

// active returns the number of open connections.
func (l *connLimiter) active() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// takeToken spends one of key's rate tokens; false when none is left.
func (l *connLimiter) takeToken(key netip.Prefix) bool {
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
func (l *connLimiter) sweep(now time.Time, perSecond float64) {
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*perSecond >= float64(l.rate) {
			delete(l.buckets, k)
		}
	}
}

// clientKeyOf returns the unit the per-address limit counts, an IPv4
// address or the /64 of an IPv6 address (one subscriber holds a whole
// /64), and whether the client is exempt from that limit (loopback).
// Addresses that are not IP (tests with pipes) share one zero key.
func clientKeyOf(a net.Addr) (netip.Prefix, bool) {
	var ip netip.Addr
	if tcp, ok := a.(*net.TCPAddr); ok {
		ip, _ = netip.AddrFromSlice(tcp.IP)
	} else if a != nil {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	ip = ip.Unmap()
	if !ip.IsValid() {
		return netip.Prefix{}, false
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p, ip.IsLoopback()
	}
	return netip.PrefixFrom(ip, ip.BitLen()), ip.IsLoopback()
}
