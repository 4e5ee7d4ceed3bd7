package auth

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Limits configure the failed-login rate limiter.
type Limits struct {
	// MaxFailures failed logins within Window block the key (remote
	// address or account) for Lockout.
	MaxFailures int
	Window      time.Duration
	Lockout     time.Duration
	// MaxEntries bounds the number of remote addresses and, separately,
	// accounts tracked, so that a flood from many addresses cannot exhaust
	// memory.
	MaxEntries int
}

// DefaultLimits: 10 failures in 5 minutes block for 15 minutes.
var DefaultLimits = Limits{MaxFailures: 10, Window: 5 * time.Minute, Lockout: 15 * time.Minute, MaxEntries: 65536}

// failures counts recent failed logins of one key.
type failures struct {
	count        int
	windowStart  time.Time
	blockedUntil time.Time
}

// limiter keeps per-key failure counters in a bounded map.
type limiter struct {
	mu      sync.Mutex
	limits  Limits
	entries map[string]*failures
}

func newLimiter(l Limits) *limiter {
	return &limiter{limits: l, entries: make(map[string]*failures)}
}

// blocked reports whether key is locked out at now.
func (l *limiter) blocked(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.entries[key]
	return f != nil && now.Before(f.blockedUntil)
}

// fail records a failure of key and reports whether it is now blocked.
func (l *limiter) fail(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.entries[key]
	if f == nil {
		if len(l.entries) >= l.limits.MaxEntries {
			l.evict(now)
		}
		f = &failures{windowStart: now}
		l.entries[key] = f
	}
	if now.Sub(f.windowStart) > l.limits.Window {
		f.count, f.windowStart = 0, now
	}
	f.count++
	if f.count >= l.limits.MaxFailures {
		f.blockedUntil = now.Add(l.limits.Lockout)
		f.count, f.windowStart = 0, now
	}
	return now.Before(f.blockedUntil)
}

// reset forgets key (after a successful login).
func (l *limiter) reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.entries, key)
}

// evict frees room: first every entry that no longer matters, then, if the
// map is still too full, unblocked entries, then any, until it is at 90 %
// of its capacity. Called with mu held.
func (l *limiter) evict(now time.Time) {
	for k, f := range l.entries {
		if now.Sub(f.windowStart) > l.limits.Window && !now.Before(f.blockedUntil) {
			delete(l.entries, k)
		}
	}
	target := l.limits.MaxEntries * 9 / 10
	for pass := 0; pass < 2 && len(l.entries) > target; pass++ {
		for k, f := range l.entries {
			if len(l.entries) <= target {
				break
			}
			if pass == 1 || !now.Before(f.blockedUntil) {
				delete(l.entries, k)
			}
		}
	}
}

// len returns the number of tracked keys.
func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// remoteKey turns a remote address ("192.0.2.1", "[2001:db8::1]:993") into
// the key its failures are counted under. IPv6 addresses count per /64,
// the usual allocation to one subscriber, so an attacker cannot escape the
// limit by rotating addresses within their own network.
//
// ip is the address alone (no port), for logs.
func remoteKey(remote string) (key, ip string) {
	s := strings.TrimSpace(remote)
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.Trim(s, "[]")
	addr, err := netip.ParseAddr(s)
	if err != nil {
		if len(s) > 64 {
			s = s[:64]
		}
		return "?" + s, s
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		if p, err := addr.Prefix(64); err == nil {
			return p.String(), addr.String()
		}
	}
	return addr.String(), addr.String()
}
