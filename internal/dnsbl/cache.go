package dnsbl

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"pimail/internal/dnsresolver"
)

// cacheKey names one cached answer: a zone and the address (a /32 or
// /128) or, in the bitmap form, the /25 the answer covers.
type cacheKey struct {
	zone   int
	prefix netip.Prefix
}

// entry is one cached answer.
type entry struct {
	expires time.Time
	bitmap  bool   // bits is the answer; else listed is
	bits    Bitmap // the /25's listed hosts
	listed  bool
}

func (e *entry) lists(ip netip.Addr) bool {
	if e.bitmap {
		return e.bits.Has(bitmapIndex(ip))
	}
	return e.listed
}

// call is one query in flight; lookups of the same key wait for it.
type call struct {
	done chan struct{}
	e    entry
	err  error
}

// cache holds answers until they expire, and the queries in flight.
type cache struct {
	max   int
	now   func() time.Time
	stats counters

	mu       sync.Mutex
	entries  map[cacheKey]*entry
	inflight map[cacheKey]*call
}

func newCache(max int, now func() time.Time) *cache {
	return &cache{max: max, now: now, entries: map[cacheKey]*entry{}, inflight: map[cacheKey]*call{}}
}

// get answers from the cache. Every call counts as one lookup.
func (c *cache) get(k cacheKey, ip netip.Addr) (listed, hit bool) {
	c.stats.lookups.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return false, false
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, k)
		return false, false
	}
	c.stats.hits.Add(1)
	return e.lists(ip), true
}

// put stores an answer, making room when the cache is full: expired
// entries go first, then arbitrary ones (Go's map order is random), so
// the work per insertion stays bounded on average.
func (c *cache) put(k cacheKey, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.max {
		now := c.now()
		for key, old := range c.entries {
			if !now.Before(old.expires) {
				delete(c.entries, key)
			}
		}
		for key := range c.entries {
			if len(c.entries) < c.max-c.max/10 {
				break
			}
			delete(c.entries, key)
			c.stats.evicted.Add(1)
		}
	}
	c.entries[k] = &e
}

// keyFor returns the cache key zone i uses for ip, and false when the
// zone is not asked about this kind of address.
func (c *Checker) keyFor(i int, z Zone, ip netip.Addr) (cacheKey, bool) {
	if ip.Is4() && z.BitmapName != "" {
		return cacheKey{zone: i, prefix: bitmapPrefix(ip)}, true
	}
	if z.Name == "" {
		return cacheKey{}, false // a bitmap-only zone has nothing for IPv6
	}
	return cacheKey{zone: i, prefix: netip.PrefixFrom(ip, ip.BitLen())}, true
}

// lookup answers a key that was not in the cache: it joins a query in
// flight for the same key or sends one, and caches the answer.
func (c *Checker) lookup(k cacheKey, z Zone, ip netip.Addr) (bool, error) {
	ca := c.cache
	ca.mu.Lock()
	if cl, ok := ca.inflight[k]; ok {
		ca.mu.Unlock()
		ca.stats.coalesced.Add(1)
		<-cl.done
		return cl.e.lists(ip), cl.err
	}
	cl := &call{done: make(chan struct{})}
	ca.inflight[k] = cl
	ca.mu.Unlock()

	ca.stats.queries.Add(1)
	// The query does not belong to the session that started it: other
	// sessions may be waiting for it too, so only the timeout ends it.
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	e, err := c.query(ctx, z, ip)
	cancel()
	cl.e, cl.err = e, err
	if err != nil {
		if errors.Is(err, dnsresolver.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			ca.stats.timeouts.Add(1)
		} else {
			ca.stats.errors.Add(1)
		}
		c.logger.Debug("blocklist lookup failed; counted as not listed", "zone", z.label(), "err", err)
	} else {
		ca.put(k, e)
		if e.lists(ip) {
			ca.stats.listed.Add(1)
		}
	}
	ca.mu.Lock()
	delete(ca.inflight, k)
	ca.mu.Unlock()
	close(cl.done)
	return e.lists(ip), err
}

// query asks the zone about ip and returns the answer to cache.
func (c *Checker) query(ctx context.Context, z Zone, ip netip.Addr) (entry, error) {
	if ip.Is4() && z.BitmapName != "" {
		recs, res, err := c.resolver.LookupAAAA(ctx, bitmapName(ip, z.BitmapName))
		if err != nil {
			return entry{}, err
		}
		e := entry{bitmap: true}
		for _, r := range recs {
			e.bits.Or(Bitmap(r.IP.As16()))
		}
		e.expires = c.expiry(res, len(recs) > 0)
		return e, nil
	}
	recs, res, err := c.resolver.LookupA(ctx, ipName(ip, z.Name))
	if err != nil {
		return entry{}, err
	}
	var e entry
	for _, r := range recs {
		if listingCode(r.IP) {
			e.listed = true
		} else {
			// RFC 5782 §2.1: entries are in 127.0.0.0/8. Anything else
			// is a resolver that rewrites NXDOMAIN, or an error code.
			c.logger.Warn("blocklist answer is not a listing code; ignored", "zone", z.Name, "answer", r.IP)
		}
	}
	e.expires = c.expiry(res, len(recs) > 0)
	return e, nil
}

// expiry is when an answer stops being used: its TTL bounded by the
// configuration, or for a negative answer the SOA's negative TTL
// (RFC 2308 §5) or the default when there was no SOA.
func (c *Checker) expiry(res dnsresolver.Result, positive bool) time.Time {
	ttl := res.TTL
	maxTTL := c.cfg.MaxTTL
	if !positive {
		maxTTL = c.cfg.MaxNegativeTTL
		if ttl <= 0 {
			ttl = c.cfg.NegativeTTL
		}
	}
	ttl = min(max(ttl, c.cfg.MinTTL), maxTTL)
	return c.cfg.Now().Add(ttl)
}

// Stats are a checker's counters since it was made.
type Stats struct {
	// Lookups is how many zone lookups were asked for (one per zone per
	// checked connection; exempt addresses are not counted).
	Lookups uint64
	// CacheHits were answered from the cache.
	CacheHits uint64
	// Coalesced waited for a query another lookup had already sent.
	Coalesced uint64
	// Queries is how many DNS queries were sent.
	Queries uint64
	// Timeouts and Errors are failed queries (counted as not listed).
	Timeouts, Errors uint64
	// Listed is how many queried answers listed the address asked about.
	Listed uint64
	// Skipped counts addresses exempt from checking (local ones).
	Skipped uint64
	// Evicted counts live entries dropped because the cache was full.
	Evicted uint64
	// Entries is the number of answers cached now.
	Entries int
}

// HitRatio is the fraction of lookups answered without a query of their
// own (from the cache, or by sharing one in flight).
func (s Stats) HitRatio() float64 {
	if s.Lookups == 0 {
		return 0
	}
	return float64(s.CacheHits+s.Coalesced) / float64(s.Lookups)
}

type counters struct {
	lookups, hits, coalesced, queries, timeouts, errors, listed, skipped, evicted atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Lookups: c.lookups.Load(), CacheHits: c.hits.Load(), Coalesced: c.coalesced.Load(),
		Queries: c.queries.Load(), Timeouts: c.timeouts.Load(), Errors: c.errors.Load(),
		Listed: c.listed.Load(), Skipped: c.skipped.Load(), Evicted: c.evicted.Load(),
	}
}
