package dnsbl

import (
	"context"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"pimail/internal/dnsresolver"
)

// The spam trace of seed paper 002 (Table 1): 101,692 connections from
// 19,492 addresses in 8,832 /24s over two months, answers cached 24 hours.
const (
	traceConns    = 101_692
	traceIPs      = 19_492
	tracePrefixes = 8_832
	traceSpan     = 61 * 24 * time.Hour
)

type traceConn struct {
	at time.Duration
	ip netip.Addr
}

// botnetTrace generates a deterministic trace shaped like the paper's:
// bots cluster in /24s (a few /24s hold many bots, most hold one or two),
// a few bots send many connections, and each /24 is active in bursts
// (campaigns a few days long), which is the temporal locality the paper
// measured. It also returns the list a blocklist would hold: most of the
// bots and some of their neighbours.
func botnetTrace() ([]traceConn, []netip.Prefix) {
	rng := rand.New(rand.NewPCG(2007, 5))
	// The /24s, in public unicast space.
	seen := map[[3]byte]bool{}
	var nets [][3]byte
	for len(nets) < tracePrefixes {
		n := [3]byte{byte(1 + rng.IntN(222)), byte(rng.IntN(256)), byte(rng.IntN(256))}
		a := netip.AddrFrom4([4]byte{n[0], n[1], n[2], 1})
		if seen[n] || a.IsPrivate() || a.IsLoopback() || sharedSpace.Contains(a) {
			continue
		}
		seen[n] = true
		nets = append(nets, n)
	}
	// Hosts per /24: one each, the rest by a heavy-tailed weight.
	hosts := make([]int, tracePrefixes)
	wcdf := make([]float64, tracePrefixes)
	var wsum float64
	for i := range hosts {
		hosts[i] = 1
		wsum += math.Pow(float64(i+1), -0.9)
		wcdf[i] = wsum
	}
	for extra := traceIPs - tracePrefixes; extra > 0; {
		i, _ := slices.BinarySearch(wcdf, rng.Float64()*wsum)
		i = min(i, tracePrefixes-1)
		if hosts[i] < 250 {
			hosts[i]++
			extra--
		}
	}
	// The bots, and each /24's campaign windows.
	type bot struct {
		ip  netip.Addr
		net int
	}
	var bots []bot
	var list []netip.Prefix
	type window struct{ start, length time.Duration }
	windows := make([][]window, tracePrefixes)
	for i, n := range nets {
		perm := rng.Perm(254)
		for h := 0; h < hosts[i]; h++ {
			a := netip.AddrFrom4([4]byte{n[0], n[1], n[2], byte(1 + perm[h])})
			bots = append(bots, bot{a, i})
			if rng.Float64() < 0.85 { // most bots are already listed
				list = append(list, netip.PrefixFrom(a, 32))
			}
		}
		for h := hosts[i]; h < min(254, hosts[i]*3); h++ { // listed neighbours not in the trace
			list = append(list, netip.PrefixFrom(netip.AddrFrom4([4]byte{n[0], n[1], n[2], byte(1 + perm[h])}), 32))
		}
		for w := 0; w < 1+rng.IntN(3); w++ {
			length := time.Duration(rng.ExpFloat64() * float64(36*time.Hour))
			windows[i] = append(windows[i], window{time.Duration(rng.Int64N(int64(traceSpan - length))), length})
		}
	}
	// Connections: one per bot, the rest to bots by a heavy-tailed weight
	// (rank^-1 over a shuffled order).
	order := rng.Perm(len(bots))
	cdf := make([]float64, len(bots))
	var csum float64
	for r := range order {
		csum += 1 / float64(r+1)
		cdf[r] = csum
	}
	conns := make([]traceConn, 0, traceConns)
	place := func(b bot) {
		ws := windows[b.net]
		w := ws[rng.IntN(len(ws))]
		at := w.start + time.Duration(rng.Int64N(int64(w.length)+1))
		conns = append(conns, traceConn{at, b.ip})
	}
	for _, b := range bots {
		place(b)
	}
	for len(conns) < traceConns {
		r, _ := slices.BinarySearch(cdf, rng.Float64()*csum)
		place(bots[order[min(r, len(order)-1)]])
	}
	slices.SortFunc(conns, func(a, b traceConn) int { return int(a.at - b.at) })
	return conns, list
}

// TestBotnetTraceCaching replays the synthetic trace through a per-address
// zone and a prefix-bitmap zone, answers cached for the zone's TTL, and
// reports queries per connection and hit ratios (DESIGN principle 4). The
// two forms must agree on every verdict.
func TestBotnetTraceCaching(t *testing.T) {
	if testing.Short() {
		t.Skip("trace replay in -short mode")
	}
	conns, list := botnetTrace()
	ips, nets24, nets25 := map[netip.Addr]bool{}, map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	for _, c := range conns {
		ips[c.ip] = true
		p24, _ := c.ip.Prefix(24)
		nets24[p24] = true
		nets25[bitmapPrefix(c.ip)] = true
	}
	if len(conns) != traceConns || len(ips) != traceIPs || len(nets24) != tracePrefixes {
		t.Fatalf("trace: %d connections, %d addresses, %d /24s", len(conns), len(ips), len(nets24))
	}
	for _, ttl := range []time.Duration{24 * time.Hour, time.Hour} {
		zs, err := NewZoneServer(ZoneConfig{Name: "bl.test", TTL: ttl, NegativeTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		if err := zs.SetList(list); err != nil {
			t.Fatal(err)
		}
		res, _ := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: zs}})
		clk := newClock()
		start := clk.Now()
		mk := func(z Zone) *Checker {
			return newChecker(t, Config{Resolver: res, Zones: []Zone{z}, Now: clk.Now, MaxTTL: ttl, MaxNegativeTTL: ttl})
		}
		perIP, prefix := mk(Zone{Name: "bl.test"}), mk(Zone{BitmapName: "bitmap.bl.test"})
		ctx := context.Background()
		listed := 0
		began := time.Now()
		for i, c := range conns {
			clk.Advance(start.Add(c.at).Sub(clk.Now()))
			a, b := perIP.Check(ctx, c.ip), prefix.Check(ctx, c.ip)
			if a.Score != b.Score || a.Incomplete || b.Incomplete {
				t.Fatalf("connection %d from %v: per-IP %+v, prefix %+v", i, c.ip, a, b)
			}
			if a.Score > 0 {
				listed++
			}
		}
		sa, sb := perIP.Stats(), prefix.Stats()
		t.Logf("TTL %v: %d connections (%d listed), %d addresses, %d /24s, %d /25s; replay %v",
			ttl, len(conns), listed, len(ips), len(nets24), len(nets25), time.Since(began).Round(time.Millisecond))
		t.Logf("  per-address: %6d queries, %.4f per connection, hit ratio %.1f%%", sa.Queries, float64(sa.Queries)/float64(len(conns)), 100*sa.HitRatio())
		t.Logf("  /25 bitmap:  %6d queries, %.4f per connection, hit ratio %.1f%% (%.0f%% fewer queries)",
			sb.Queries, float64(sb.Queries)/float64(len(conns)), 100*sb.HitRatio(), 100*(1-float64(sb.Queries)/float64(sa.Queries)))
		// Every address and every /25 must be asked at least once; the
		// bitmap form must need fewer queries than the per-address one.
		if sa.Queries < uint64(len(ips)) || sb.Queries < uint64(len(nets25)) || sb.Queries >= sa.Queries {
			t.Fatalf("implausible query counts: per-IP %d, prefix %d", sa.Queries, sb.Queries)
		}
		if sa.Lookups != uint64(len(conns)) || sa.CacheHits+sa.Queries != sa.Lookups {
			t.Fatalf("per-IP counters inconsistent: %+v", sa)
		}
	}
}

func BenchmarkCheckCached(b *testing.B) {
	zs, _ := NewZoneServer(ZoneConfig{Name: "bl.test"})
	res, _ := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: zs}})
	c, _ := New(Config{Resolver: res, Zones: []Zone{{BitmapName: "bitmap.bl.test"}}, Logger: quiet()})
	ctx := context.Background()
	addr := ip("203.0.113.9")
	c.Check(ctx, addr)
	b.ReportAllocs()
	for b.Loop() {
		c.Check(ctx, addr)
	}
}
