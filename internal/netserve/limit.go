package netserve

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Reasons Limiter.Acquire gives for a refusal ("" admits).
const (
	OverTotal     = "total"
	OverPerClient = "per-address"
	OverRate      = "rate"
)

// maxTrackedClients bounds the rate limiter's memory. Beyond it, clients
// not already tracked are not rate limited (the concurrency limits still
// hold); a sweep forgets clients whose bucket has refilled, once per
// window.
const maxTrackedClients = 100_000

// Limiter counts open connections in total and per client key, and
// new connections per client key in a token bucket: rate tokens per
// window, refilled continuously, so a client may open rate connections
// at once and then one every window/rate. Every listener's Server has
// one (IMAP, POP3, ManageSieve, HTTP and both SMTP roles).
type Limiter struct {
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

// NewLimiter returns a limiter; limits <= 0 mean none, and a window <= 0
// is a minute.
func NewLimiter(maxTotal, maxPerClient, rate int, window time.Duration) *Limiter {
	if window <= 0 {
		window = time.Minute
	}
	return &Limiter{
		maxTotal: maxTotal, maxPerClient: maxPerClient, rate: rate, window: window, now: time.Now,
		open: map[netip.Prefix]int{}, buckets: map[netip.Prefix]*bucket{},
	}
}

// Acquire counts a new connection from key open, or returns which limit
// refuses it (OverRate, OverTotal or OverPerClient). Every attempt of a non-exempt client spends a rate token,
// refused ones too, so a client hammering the port stays refused. An
// exempt client is held only to the total.
func (l *Limiter) Acquire(key netip.Prefix, exempt bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !exempt && !l.takeToken(key) {
		return OverRate
	}
	if l.maxTotal > 0 && l.total >= l.maxTotal {
		return OverTotal
	}
	if !exempt && l.maxPerClient > 0 && l.open[key] >= l.maxPerClient {
		return OverPerClient
	}
	l.total++
	l.open[key]++
	return ""
}

// Release gives back a connection Acquire counted.
func (l *Limiter) Release(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if n := l.open[key] - 1; n > 0 {
		l.open[key] = n
	} else {
		delete(l.open, key)
	}
}

// Active returns the number of open connections.
func (l *Limiter) Active() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// takeToken spends one of key's rate tokens; false when none is left.
func (l *Limiter) takeToken(key netip.Prefix) bool {
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
func (l *Limiter) sweep(now time.Time, perSecond float64) {
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*perSecond >= float64(l.rate) {
			delete(l.buckets, k)
		}
	}
}

// ClientKey returns the unit the per-address limits count: an IPv4
// address, or the /64 of an IPv6 address (one subscriber line holds a
// whole /64, so counting single IPv6 addresses would not limit anything).
func ClientKey(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.PrefixFrom(ip, ip.BitLen())
}

// AddrOf returns the IP of a connection's address (IPv4-mapped addresses
// unmapped), or the zero Addr when it is not IP (tests with pipes).
func AddrOf(a net.Addr) netip.Addr {
	var ip netip.Addr
	if tcp, ok := a.(*net.TCPAddr); ok {
		ip, _ = netip.AddrFromSlice(tcp.IP)
	} else if a != nil {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	return ip.Unmap()
}

// clientKeyOf returns the ClientKey of a connection's address, and the
// address. Addresses that are not IP share one zero key.
func clientKeyOf(a net.Addr) (netip.Prefix, netip.Addr) {
	ip := AddrOf(a)
	if !ip.IsValid() {
		return netip.Prefix{}, ip
	}
	return ClientKey(ip), ip
}
