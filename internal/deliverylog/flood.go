package deliverylog

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"pimail/internal/netserve"
	"pimail/internal/store"
)

// A flood of refusals (guessed recipients, a directory harvest, a
// botnet's retries) would cost a log row per refused recipient. An
// attacker can make thousands of refused sessions a second, which at 30
// days of retention would fill the disk of a small server: the log would
// become the way to take it down. So a client (an IPv4 address or an IPv6
// /64, the unit of every per-client limit: netserve.ClientKey) has its
// refusals logged one by one only up to a burst per window (FloodBurst
// per FloodWindow). Beyond that they are counted, and when the window
// ends one summary entry stands for them: its Count says how many, its
// Reason gives the last one's reply and addresses. The dashboard's
// counts stay exact (the store sums Count). Refusals without a parseable
// client address are never held.
type floodLimit struct {
	burst, maxNets int

	mu   sync.Mutex
	nets map[netip.Prefix]*floodNet
}

// floodNet is one client's refusals in the current window.
type floodNet struct {
	logged, held int
	last         store.DeliveryLogEntry // the newest held refusal
}

// maxFloodNets bounds the clients counted in one window; the refusals of
// clients beyond it share one count (the zero prefix).
const maxFloodNets = 4096

func newFloodLimit(burst int) *floodLimit {
	if burst < 0 {
		return nil // no limit
	}
	return &floodLimit{burst: burst, maxNets: maxFloodNets, nets: map[netip.Prefix]*floodNet{}}
}

// admit reports whether e is logged now; a refusal beyond its client's
// burst is counted instead and admit returns false.
func (f *floodLimit) admit(e store.DeliveryLogEntry) bool {
	if f == nil || e.Direction != store.DirectionIn || e.Result != store.ResultRejected || e.Count > 1 {
		return true
	}
	key, ok := networkOf(e.RemoteIP)
	if !ok {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nets[key]
	if n == nil && len(f.nets) >= f.maxNets {
		key = netip.Prefix{}
		n = f.nets[key]
	}
	if n == nil {
		n = &floodNet{}
		f.nets[key] = n
	}
	if n.logged < f.burst {
		n.logged++
		return true
	}
	n.held++
	n.last = e
	return false
}

// rollover ends the window: the summaries of what was held in it (at
// time now), and a fresh count.
func (f *floodLimit) rollover(now time.Time, window time.Duration) []store.DeliveryLogEntry {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	nets := f.nets
	f.nets = make(map[netip.Prefix]*floodNet, len(nets))
	f.mu.Unlock()
	var out []store.DeliveryLogEntry
	for key, n := range nets {
		if n.held == 0 {
			continue
		}
		from := "many clients"
		if key.IsValid() {
			from = key.String()
		}
		last := n.last
		out = append(out, store.DeliveryLogEntry{
			Time: now, Direction: store.DirectionIn, Result: store.ResultRejected, RemoteIP: last.RemoteIP,
			Count: n.held,
			Reason: fmt.Sprintf("%d more refusals from %s within %s, beyond %d logged one by one; the last: %s (from <%s> to <%s>)",
				n.held, from, window, f.burst, last.Reason, last.From, last.To),
		})
	}
	return out
}

// networkOf is the unit a client address counts under.
func networkOf(ip string) (netip.Prefix, bool) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.Prefix{}, false
	}
	return netserve.ClientKey(a), true
}
