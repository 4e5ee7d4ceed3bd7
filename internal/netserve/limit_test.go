package netserve

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestClientKeyOf(t *testing.T) {
	for _, c := range []struct {
		addr   string
		key    string
		exempt bool
	}{
		{"192.0.2.7:1234", "192.0.2.7/32", false},
		{"[::ffff:192.0.2.7]:1234", "192.0.2.7/32", false},
		{"[2001:db8:1:2:3:4:5:6]:143", "2001:db8:1:2::/64", false},
		{"[2001:db8:1:2:ffff::1]:143", "2001:db8:1:2::/64", false},
		{"127.0.0.1:5", "127.0.0.1/32", true},
		{"127.9.9.9:5", "127.9.9.9/32", true},
		{"[::1]:5", "::/64", true},
	} {
		ap := netip.MustParseAddrPort(c.addr)
		key, ip := clientKeyOf(net.TCPAddrFromAddrPort(ap))
		if exempt := ip.IsLoopback(); key.String() != c.key || exempt != c.exempt {
			t.Errorf("%s: key %s exempt %v, want %s %v", c.addr, key, exempt, c.key, c.exempt)
		}
	}
}

func TestConnLimiter(t *testing.T) {
	l := NewLimiter(4, 2, 0, 0)
	a := netip.MustParsePrefix("192.0.2.1/32")
	b := netip.MustParsePrefix("2001:db8::/64")
	lo := netip.MustParsePrefix("127.0.0.1/32")
	for i, want := range []string{"", "", OverPerClient} {
		if got := l.Acquire(a, false); got != want {
			t.Fatalf("a #%d: %q, want %q", i, got, want)
		}
	}
	if got := l.Acquire(b, false); got != "" {
		t.Fatalf("b: %q", got)
	}
	// Loopback skips the per-address limit but not the total.
	if got := l.Acquire(lo, true); got != "" {
		t.Fatalf("loopback: %q", got)
	}
	if got := l.Acquire(lo, true); got != OverTotal {
		t.Fatalf("loopback over total: %q", got)
	}
	l.Release(a)
	if got := l.Acquire(a, false); got != "" {
		t.Fatalf("a after release: %q", got)
	}
	for _, k := range []netip.Prefix{a, a, b, lo} {
		l.Release(k)
	}
	if l.total != 0 || len(l.open) != 0 {
		t.Fatalf("after releasing all: total %d, open %v", l.total, l.open)
	}
	// Negative limits mean none.
	u := NewLimiter(-1, -1, 0, 0)
	for range 100 {
		if got := u.Acquire(a, false); got != "" {
			t.Fatalf("unlimited: %q", got)
		}
	}
}

func TestConnLimiterRate(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := NewLimiter(-1, -1, 3, time.Minute)
	l.now = func() time.Time { return now }
	a := netip.MustParsePrefix("192.0.2.1/32")
	b := netip.MustParsePrefix("192.0.2.2/32")
	lo := netip.MustParsePrefix("127.0.0.1/32")
	for i, want := range []string{"", "", "", OverRate, OverRate} {
		if got := l.Acquire(a, false); got != want {
			t.Fatalf("a #%d: %q, want %q", i, got, want)
		}
	}
	// Another client and an exempt one are not affected.
	if got := l.Acquire(b, false); got != "" {
		t.Fatalf("b: %q", got)
	}
	for range 10 {
		if got := l.Acquire(lo, true); got != "" {
			t.Fatalf("loopback: %q", got)
		}
	}
	// One token comes back every 20 s; refused attempts spent theirs.
	now = now.Add(20 * time.Second)
	if got := l.Acquire(a, false); got != "" {
		t.Fatalf("a after 20 s: %q", got)
	}
	if got := l.Acquire(a, false); got != OverRate {
		t.Fatalf("a again: %q", got)
	}
	// After a full window the bucket is full again, and swept.
	now = now.Add(2 * time.Minute)
	for i := range 3 {
		if got := l.Acquire(a, false); got != "" {
			t.Fatalf("a #%d after the window: %q", i, got)
		}
	}
	if n := len(l.buckets); n != 1 {
		t.Errorf("%d buckets after the sweep, want 1 (a)", n)
	}
}
