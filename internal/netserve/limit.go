package netserve

import (
	"net"
	"net/netip"
	"sync"
)

// Reasons connLimiter.acquire gives for a refusal.
const (
	overTotalLimit  = "total"
	overClientLimit = "per-address"
)

// connLimiter counts open connections in total and per client key.
type connLimiter struct {
	maxTotal, maxPerClient int // <= 0: no limit
	mu                     sync.Mutex
	total                  int
	open                   map[netip.Prefix]int
}

func newConnLimiter(maxTotal, maxPerClient int) *connLimiter {
	return &connLimiter{maxTotal: maxTotal, maxPerClient: maxPerClient, open: map[netip.Prefix]int{}}
}

// acquire counts a new connection from key open, or returns which limit
// refuses it. An exempt (loopback) client is held only to the total.
func (l *connLimiter) acquire(key netip.Prefix, exempt bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
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
