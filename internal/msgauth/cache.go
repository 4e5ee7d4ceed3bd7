package msgauth

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"time"

	"pimail/internal/dnsresolver"
)

// Cache bounds for DNS answers kept by a Cache.
const (
	// DefaultCacheSize is how many answers a Cache keeps.
	DefaultCacheSize = 4096
	// maxCacheTTL caps how long a positive answer is kept, whatever its
	// TTL says: a domain that changes its SPF or DMARC record is heard
	// within the hour.
	maxCacheTTL = time.Hour
	// maxNegativeTTL caps a negative answer (NXDOMAIN, NODATA); a zone
	// that sends none (no SOA) is asked again after defaultNegativeTTL.
	maxNegativeTTL     = 15 * time.Minute
	defaultNegativeTTL = time.Minute
)

// Cache is a dnsresolver.Resolver that keeps answers for their TTL
// (RFC 1035 §3.2.1; negative answers RFC 2308 §5), bounded in count and
// age. A burst of mail from one sender then costs one round of SPF, DKIM
// key and DMARC lookups. Failures are not kept: the next message asks
// again. It is safe for concurrent use.
type Cache struct {
	r   Resolver
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[cacheKey]cacheEntry
	hits    uint64
	misses  uint64
}

type cacheKey struct {
	qtype string
	name  string
}

// ptrCacheKey is the key of a reverse lookup.
func ptrCacheKey(addr netip.Addr) string { return addr.Unmap().String() }

type cacheEntry struct {
	recs    any // []dnsresolver.TXTRecord, []dnsresolver.AddrRecord, …
	res     dnsresolver.Result
	expires time.Time
}

var _ Resolver = (*Cache)(nil)

// NewCache returns a Cache in front of r keeping up to max answers
// (DefaultCacheSize when max <= 0).
func NewCache(r Resolver, max int) *Cache {
	if max <= 0 {
		max = DefaultCacheSize
	}
	return &Cache{r: r, max: max, now: time.Now, entries: map[cacheKey]cacheEntry{}}
}

// Stats returns the number of answers served from the cache and asked of
// the resolver.
func (c *Cache) Stats() (hits, misses uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

func (c *Cache) LookupA(ctx context.Context, name string) ([]dnsresolver.AddrRecord, dnsresolver.Result, error) {
	return cachedLookup(c, ctx, "A", name, c.r.LookupA)
}

func (c *Cache) LookupAAAA(ctx context.Context, name string) ([]dnsresolver.AddrRecord, dnsresolver.Result, error) {
	return cachedLookup(c, ctx, "AAAA", name, c.r.LookupAAAA)
}

func (c *Cache) LookupTXT(ctx context.Context, name string) ([]dnsresolver.TXTRecord, dnsresolver.Result, error) {
	return cachedLookup(c, ctx, "TXT", name, c.r.LookupTXT)
}

func (c *Cache) LookupMX(ctx context.Context, name string) ([]dnsresolver.MXRecord, dnsresolver.Result, error) {
	return cachedLookup(c, ctx, "MX", name, c.r.LookupMX)
}

func (c *Cache) LookupPTR(ctx context.Context, addr netip.Addr) ([]string, dnsresolver.Result, error) {
	return cachedLookup(c, ctx, "PTR", ptrCacheKey(addr), func(ctx context.Context, _ string) ([]string, dnsresolver.Result, error) {
		return c.r.LookupPTR(ctx, addr)
	})
}

// cachedLookup answers from the cache or asks the resolver and keeps its
// answer. Callers get their own copy of the records slice.
func cachedLookup[T any](c *Cache, ctx context.Context, qtype, name string,
	ask func(context.Context, string) ([]T, dnsresolver.Result, error)) ([]T, dnsresolver.Result, error) {
	k := cacheKey{qtype: qtype, name: strings.ToLower(strings.TrimSuffix(name, "."))}
	now := c.now()
	c.mu.Lock()
	if e, ok := c.entries[k]; ok && now.Before(e.expires) {
		c.hits++
		c.mu.Unlock()
		return append([]T(nil), e.recs.([]T)...), e.res, nil
	}
	c.misses++
	c.mu.Unlock()

	recs, res, err := ask(ctx, name)
	if err != nil {
		return nil, res, err
	}
	if ttl := cacheTTL(len(recs) > 0, res.TTL); ttl > 0 {
		c.put(k, cacheEntry{recs: append([]T(nil), recs...), res: res, expires: now.Add(ttl)})
	}
	return recs, res, nil
}

// cacheTTL is how long an answer is kept: its TTL, capped.
func cacheTTL(positive bool, ttl time.Duration) time.Duration {
	if positive {
		return min(ttl, maxCacheTTL)
	}
	if ttl <= 0 {
		return defaultNegativeTTL
	}
	return min(ttl, maxNegativeTTL)
}

// put stores e, first making room: expired entries go, and if the cache
// is still full, an arbitrary one (Go's map order) does.
func (c *Cache) put(k cacheKey, e cacheEntry) {
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
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, key)
		}
	}
	c.entries[k] = e
}
