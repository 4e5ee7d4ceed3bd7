package spf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"pimail/internal/dnsresolver"
)

// match evaluates one mechanism (§5). An error is errTemp (temperror) or
// a permerror.
func (e *evaluation) match(ctx context.Context, m mechanism) (bool, error) {
	ip := e.c.req.IP
	switch m.name {
	case "all":
		return true, nil
	case "ip4", "ip6":
		// §5.6: an ip4 network never matches an IPv6 client and the
		// other way round (an IPv4-mapped client address was unmapped).
		return m.prefix.Contains(ip), nil
	}
	// Every other mechanism causes DNS queries (§4.6.4).
	if err := e.c.count(); err != nil {
		return false, err
	}
	target := e.domain
	if m.domainSpec != "" {
		t, err := e.target(ctx, m.domainSpec)
		if err != nil {
			return false, err
		}
		target = t
	}
	if !validTarget(target) {
		// RFC 7208 §4.8 leaves a name that cannot be asked undefined; it
		// is taken as a name that does not exist (§4.3, §5: no match).
		return false, nil
	}
	switch m.name {
	case "include":
		return e.include(ctx, target)
	case "a":
		addrs, err := e.addresses(ctx, target, ip.Is4())
		if err != nil {
			return false, err
		}
		return e.anyInPrefix(addrs, m, len(addrs) == 0)
	case "mx":
		return e.mx(ctx, target, m)
	case "ptr":
		return nameMatches(e.c.validatedName(ctx, target), target), nil
	case "exists":
		// §5.7: an A query whatever the client's family.
		addrs, err := e.addresses(ctx, target, true)
		if err != nil {
			return false, err
		}
		if len(addrs) == 0 {
			return false, e.c.void()
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: mechanism %q", errSyntax, m.name)
}

// include evaluates another domain's record (§5.2): its pass matches, its
// fail, softfail and neutral do not, its errors are ours, and a domain
// without a record is a permerror.
func (e *evaluation) include(ctx context.Context, target string) (bool, error) {
	sub := &evaluation{c: e.c, domain: target, sender: e.sender, depth: e.depth + 1}
	res, _, err := sub.checkHost(ctx)
	switch res {
	case Pass:
		return true, nil
	case Fail, Softfail, Neutral:
		return false, nil
	case Temperror:
		return false, err
	case None:
		return false, errIncludeNone
	}
	return false, err
}

// mx evaluates the mx mechanism (§5.4): the addresses of at most 10 MX
// hosts, with the mechanism's prefix lengths.
func (e *evaluation) mx(ctx context.Context, target string, m mechanism) (bool, error) {
	mxs, _, err := e.c.r.LookupMX(ctx, target)
	if err != nil {
		return false, e.lookupError(err)
	}
	var hosts []string
	for _, mx := range mxs {
		if mx.Host != "" && mx.Host != "." { // RFC 7505 null MX: no host
			hosts = append(hosts, mx.Host)
		}
	}
	if len(mxs) == 0 {
		return false, e.c.void()
	}
	if len(hosts) > MaxAddressLookups {
		return false, errMXLimit
	}
	for _, h := range hosts {
		addrs, err := e.addresses(ctx, h, e.c.req.IP.Is4())
		if err != nil {
			return false, err
		}
		if ok, _ := e.anyInPrefix(addrs, m, false); ok {
			return true, nil
		}
	}
	return false, nil
}

// addresses asks for the A (v4) or AAAA records of name. NXDOMAIN and
// NODATA give none; a failed lookup is errTemp.
func (e *evaluation) addresses(ctx context.Context, name string, v4 bool) ([]netip.Addr, error) {
	lookup := e.c.r.LookupAAAA
	if v4 {
		lookup = e.c.r.LookupA
	}
	recs, _, err := lookup(ctx, name)
	if err != nil {
		return nil, e.lookupError(err)
	}
	out := make([]netip.Addr, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.IP.Unmap())
	}
	return out, nil
}

// lookupError maps a failed lookup: a name that cannot be asked counts
// as not existing, anything else is temporary (§2.6.6).
func (e *evaluation) lookupError(err error) error {
	if errors.Is(err, dnsresolver.ErrInvalidName) {
		return nil
	}
	return fmt.Errorf("%w: %w", errTemp, err)
}

// anyInPrefix reports whether an address of addrs is in the client's
// network at the mechanism's prefix length (§5.3: ip4-cidr-length for
// IPv4 clients, ip6-cidr-length for IPv6). void counts an empty answer.
func (e *evaluation) anyInPrefix(addrs []netip.Addr, m mechanism, void bool) (bool, error) {
	if void {
		return false, e.c.void()
	}
	ip := e.c.req.IP
	bits := m.cidr6
	if ip.Is4() {
		bits = m.cidr4
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return false, nil
	}
	for _, a := range addrs {
		if a.Is4() == ip.Is4() && p.Contains(a) {
			return true, nil
		}
	}
	return false, nil
}

// validatedName is the client's validated domain name (§5.5, §7.3): a PTR
// name of the client address whose own addresses include it, preferring
// target or a name below it; "unknown" when there is none. Only the
// first MaxAddressLookups names are tried, and a failed lookup skips a
// name. The names are looked up once per check.
func (c *checker) validatedName(ctx context.Context, target string) string {
	if !c.pDone {
		c.pDone = true
		c.pNames = c.validatedNames(ctx)
	}
	for _, n := range c.pNames {
		if nameMatches(n, target) {
			return n
		}
	}
	if len(c.pNames) > 0 {
		return c.pNames[0]
	}
	return "unknown"
}

// validatedNames returns the PTR names of the client address that point
// back to it.
func (c *checker) validatedNames(ctx context.Context) []string {
	names, _, err := c.r.LookupPTR(ctx, c.req.IP)
	if err != nil {
		return nil // §5.5: a failed PTR lookup means no match
	}
	if len(names) > MaxAddressLookups {
		names = names[:MaxAddressLookups]
	}
	var out []string
	for _, n := range names {
		lookup := c.r.LookupAAAA
		if c.req.IP.Is4() {
			lookup = c.r.LookupA
		}
		recs, _, err := lookup(ctx, n)
		if err != nil {
			continue
		}
		for _, r := range recs {
			if r.IP.Unmap() == c.req.IP {
				out = append(out, strings.TrimSuffix(n, "."))
				break
			}
		}
	}
	return out
}

// nameMatches: name is target or below it (§5.5), ignoring case.
func nameMatches(name, target string) bool {
	name, target = strings.ToLower(strings.TrimSuffix(name, ".")), strings.ToLower(strings.TrimSuffix(target, "."))
	return name == target || strings.HasSuffix(name, "."+target)
}

// dottedIP is %{i} (§7.3): an IPv4 address as usual, an IPv6 address as
// 32 dot-separated nibbles.
func dottedIP(ip netip.Addr) string {
	if ip.Is4() {
		return ip.String()
	}
	b := ip.As16()
	var s strings.Builder
	const hex = "0123456789abcdef"
	for i, x := range b {
		if i > 0 {
			s.WriteByte('.')
		}
		s.WriteByte(hex[x>>4])
		s.WriteByte('.')
		s.WriteByte(hex[x&0xf])
	}
	return s.String()
}
