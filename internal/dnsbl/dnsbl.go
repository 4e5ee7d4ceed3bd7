// Package dnsbl checks a connecting client's address against DNS
// blocklists (RFC 5782) and serves such lists itself.
//
// # Checking
//
// A Checker asks every configured zone about an address and sums the
// weights of the zones that list it into a score. The lookup is started
// when a connection opens (Start) and its answer collected later (Wait),
// at RCPT, so the DNS round trip overlaps with the greeting and EHLO and
// a session never waits longer than the configured timeout: a zone that
// does not answer in time counts as "not listed".
//
// Answers are cached for their TTL, negative answers (NXDOMAIN) too, for
// the negative TTL of the zone's SOA (RFC 2308 §5) or a bounded default.
// Concurrent lookups of the same key share one query.
//
// # The prefix-bitmap form
//
// Spam comes from botnets, and bots cluster in /24s (seed paper 002: one
// trace's 19,492 sending addresses lay in 8,832 /24s). Per-address answers
// cannot be shared between neighbours; a zone that answers for a whole
// prefix can. A zone configured with a BitmapName answers this form for
// IPv4 (the scheme of the paper's "DNSBLv6", made exact here):
//
//   - For the client a.b.c.d the query is the AAAA record of
//     "<h>.<c>.<b>.<a>.<BitmapName>", with h = 0 when d < 128 and h = 1
//     otherwise: one name per /25.
//   - The answer is one AAAA record, read as 128 bits: bit i, counted from
//     the most significant bit of the first octet, is set when the address
//     a.b.c.(128·h + i) is listed. So 10.0.0.5 listed alone in its /25 is
//     the AAAA 0400:: ; 10.0.0.133 alone is also 0400:: under h = 1.
//   - A /25 with no listed address is NXDOMAIN, cached with the SOA's
//     negative TTL like any RFC 5782 "not listed" answer.
//   - If several AAAA records come back, their bits are ORed.
//
// One answer, cached, then settles all 128 neighbours; the zone's TTL
// bounds how stale that view is, exactly as for a per-address answer. The
// form says only "listed or not": the return codes and TXT reasons of
// RFC 5782 §2.1–2.2 stay with the per-address form. IPv6 clients are
// asked in the per-address nibble form (RFC 5782 §2.4) under Name.
// Resolvers with DNS-rebinding protection may drop AAAA answers whose bits
// look like private addresses, as they may drop 127.0.0.2; such a resolver
// must exempt blocklist zones.
//
// # Serving
//
// ZoneServer serves a list of addresses and prefixes in both forms, for a
// site-local blocklist and for tests.
package dnsbl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

// Defaults for the zero values of Config.
const (
	// DefaultTimeout bounds the wait for one zone's answer.
	DefaultTimeout = 5 * time.Second
	// DefaultMinTTL is the shortest time an answer is cached, so a zone
	// answering TTL 0 does not cost a query per connection.
	DefaultMinTTL = 30 * time.Second
	// DefaultMaxTTL is the longest time an answer is cached (the seed
	// paper's 24 hours).
	DefaultMaxTTL = 24 * time.Hour
	// DefaultNegativeTTL caches a "not listed" answer that carried no SOA.
	DefaultNegativeTTL = 5 * time.Minute
	// DefaultMaxNegativeTTL caps negative caching (RFC 2308 §5 suggests
	// one to three hours).
	DefaultMaxNegativeTTL = 3 * time.Hour
	// DefaultMaxEntries bounds the cache.
	DefaultMaxEntries = 100_000
)

// Zone is one blocklist.
type Zone struct {
	// Name is the zone asked in the RFC 5782 form: A records of the
	// reversed address (§2.1, IPv4) or nibbles (§2.4, IPv6). It is also
	// the name used in logs and in the reply to a rejected client.
	Name string
	// BitmapName, when set, is the zone asked for IPv4 clients in the
	// prefix-bitmap form (package documentation) instead of Name.
	BitmapName string
	// Weight is added to the score when the zone lists the client;
	// default 1.
	Weight float64
}

// Config configures a Checker.
type Config struct {
	Zones    []Zone
	Resolver dnsresolver.Resolver
	// Timeout bounds each zone lookup; default 5 s. A zone that has not
	// answered by then counts as not listing the client.
	Timeout time.Duration
	// MinTTL, MaxTTL bound how long an answer is cached (defaults 30 s
	// and 24 h); NegativeTTL caches a negative answer without an SOA
	// (default 5 min), and MaxNegativeTTL caps negative caching (3 h).
	MinTTL, MaxTTL              time.Duration
	NegativeTTL, MaxNegativeTTL time.Duration
	// MaxEntries bounds the number of cached answers; default 100,000.
	MaxEntries int
	// CheckLocal also checks loopback, private (RFC 1918, RFC 4193),
	// shared (RFC 6598) and link-local addresses, which public lists
	// never list; off by default. Tests and site-local lists set it.
	CheckLocal bool
	Logger     *slog.Logger
	// Now is the clock; default time.Now (tests replace it).
	Now func() time.Time
}

// Verdict is what the zones say about one address.
type Verdict struct {
	// Score is the sum of the weights of the zones that list the address.
	Score float64
	// Listed names the zones that list it, in configuration order (by
	// Name, or BitmapName for a zone without one).
	Listed []string
	// Hits are the same zones with their weights, for a spam filter
	// that scores each list on its own.
	Hits []Hit
	// Incomplete: some zone did not answer (timeout, failure) and was
	// counted as not listing the address.
	Incomplete bool
}

// label names the zone in logs and replies.
func (z Zone) label() string {
	if z.Name != "" {
		return z.Name
	}
	return z.BitmapName
}

// Hit is one zone that lists the address.
type Hit struct {
	Zone   string
	Weight float64
}

// Checker looks addresses up in the configured zones. It is safe for
// concurrent use.
type Checker struct {
	zones    []Zone
	resolver dnsresolver.Resolver
	cfg      Config
	logger   *slog.Logger
	cache    *cache
}

// New returns a Checker.
func New(cfg Config) (*Checker, error) {
	if cfg.Resolver == nil {
		return nil, errors.New("dnsbl: no resolver")
	}
	if len(cfg.Zones) == 0 {
		return nil, errors.New("dnsbl: no zones")
	}
	c := &Checker{resolver: cfg.Resolver, logger: cfg.Logger}
	for _, z := range cfg.Zones {
		z.Name = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(z.Name), "."))
		z.BitmapName = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(z.BitmapName), "."))
		if z.Name == "" && z.BitmapName == "" {
			return nil, errors.New("dnsbl: a zone needs a name")
		}
		for _, n := range []string{z.Name, z.BitmapName} {
			if _, ok := dns.IsDomainName(n); n != "" && !ok {
				return nil, fmt.Errorf("dnsbl: invalid zone name %q", n)
			}
		}
		if z.Weight == 0 {
			z.Weight = 1
		}
		c.zones = append(c.zones, z)
	}
	setDefault(&cfg.Timeout, DefaultTimeout)
	setDefault(&cfg.MinTTL, DefaultMinTTL)
	setDefault(&cfg.MaxTTL, DefaultMaxTTL)
	setDefault(&cfg.NegativeTTL, DefaultNegativeTTL)
	setDefault(&cfg.MaxNegativeTTL, DefaultMaxNegativeTTL)
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.logger = c.logger.With("component", "dnsbl")
	c.cfg = cfg
	c.cache = newCache(cfg.MaxEntries, cfg.Now)
	return c, nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Zones returns the configured zones, normalised.
func (c *Checker) Zones() []Zone { return append([]Zone(nil), c.zones...) }

// Stats returns the checker's counters.
func (c *Checker) Stats() Stats {
	s := c.cache.stats.snapshot()
	c.cache.mu.Lock()
	s.Entries = len(c.cache.entries)
	c.cache.mu.Unlock()
	return s
}

// exempt reports whether ip is never looked up: not a global unicast
// address a public list could hold.
func (c *Checker) exempt(ip netip.Addr) bool {
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() {
		return true
	}
	if c.cfg.CheckLocal {
		return false
	}
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || sharedSpace.Contains(ip)
}

// sharedSpace is RFC 6598's carrier-grade NAT range.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// Pending is a lookup under way. Its methods may be called from any
// goroutine, and on a nil Pending (no checker): the verdict is empty.
type Pending struct {
	zones []Zone
	done  chan struct{}

	mu        sync.Mutex
	answered  []bool
	listed    []bool
	failed    []bool
	remaining int
}

// Start begins looking ip up in every zone and returns at once. Answers
// in the cache are used without a query; the others run in the
// background, each bounded by the configured timeout.
func (c *Checker) Start(ip netip.Addr) *Pending {
	ip = ip.Unmap()
	n := len(c.zones)
	p := &Pending{
		zones:    c.zones,
		done:     make(chan struct{}),
		answered: make([]bool, n),
		listed:   make([]bool, n),
		failed:   make([]bool, n),
	}
	if c.exempt(ip) {
		c.cache.stats.skipped.Add(1)
		for i := range p.answered {
			p.answered[i] = true
		}
		close(p.done)
		return p
	}
	p.remaining = n
	for i, z := range c.zones {
		key, ok := c.keyFor(i, z, ip)
		if !ok {
			p.finish(i, false, false)
			continue
		}
		if listed, hit := c.cache.get(key, ip); hit {
			p.finish(i, listed, false)
			continue
		}
		go func() {
			listed, err := c.lookup(key, z, ip)
			p.finish(i, listed, err != nil)
		}()
	}
	return p
}

// Check looks ip up and waits for the verdict (Start and Wait).
func (c *Checker) Check(ctx context.Context, ip netip.Addr) Verdict {
	return c.Start(ip).Wait(ctx)
}

// finish records zone i's answer.
func (p *Pending) finish(i int, listed, failed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answered[i] = true
	p.listed[i] = listed
	p.failed[i] = failed
	p.remaining--
	if p.remaining == 0 {
		close(p.done)
	}
}

// Done is closed when every zone has answered or timed out.
func (p *Pending) Done() <-chan struct{} {
	if p == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return p.done
}

// Wait returns the verdict once every zone has answered, or when ctx ends
// first: then the zones still outstanding count as not listing and the
// verdict is Incomplete.
func (p *Pending) Wait(ctx context.Context) Verdict {
	if p == nil {
		return Verdict{}
	}
	select {
	case <-p.done:
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var v Verdict
	for i, z := range p.zones {
		switch {
		case !p.answered[i] || p.failed[i]:
			v.Incomplete = true
		case p.listed[i]:
			v.Score += z.Weight
			v.Listed = append(v.Listed, z.label())
			v.Hits = append(v.Hits, Hit{Zone: z.label(), Weight: z.Weight})
		}
	}
	return v
}
