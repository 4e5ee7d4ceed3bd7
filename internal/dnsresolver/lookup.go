package dnsresolver

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// LookupA returns the IPv4 addresses of name.
func (c *Client) LookupA(ctx context.Context, name string) ([]AddrRecord, Result, error) {
	return lookupAddr(ctx, c, name, dns.TypeA)
}

// LookupAAAA returns the IPv6 addresses of name.
func (c *Client) LookupAAAA(ctx context.Context, name string) ([]AddrRecord, Result, error) {
	return lookupAddr(ctx, c, name, dns.TypeAAAA)
}

// LookupTXT returns the TXT records of name.
func (c *Client) LookupTXT(ctx context.Context, name string) ([]TXTRecord, Result, error) {
	rrs, res, err := c.lookup(ctx, name, dns.TypeTXT)
	if err != nil {
		return nil, res, err
	}
	out := make([]TXTRecord, 0, len(rrs))
	for _, rr := range rrs {
		t := rr.(*dns.TXT)
		out = append(out, TXTRecord{Strings: t.Txt, Text: strings.Join(t.Txt, ""), TTL: ttl(t.Hdr.Ttl)})
	}
	return out, res, nil
}

// LookupMX returns the MX records of name, in the order received.
func (c *Client) LookupMX(ctx context.Context, name string) ([]MXRecord, Result, error) {
	rrs, res, err := c.lookup(ctx, name, dns.TypeMX)
	if err != nil {
		return nil, res, err
	}
	out := make([]MXRecord, 0, len(rrs))
	for _, rr := range rrs {
		m := rr.(*dns.MX)
		out = append(out, MXRecord{Preference: m.Preference, Host: strings.TrimSuffix(m.Mx, "."), TTL: ttl(m.Hdr.Ttl)})
	}
	return out, res, nil
}

func lookupAddr(ctx context.Context, c *Client, name string, qtype uint16) ([]AddrRecord, Result, error) {
	rrs, res, err := c.lookup(ctx, name, qtype)
	if err != nil {
		return nil, res, err
	}
	out := make([]AddrRecord, 0, len(rrs))
	for _, rr := range rrs {
		var ip netip.Addr
		switch a := rr.(type) {
		case *dns.A:
			ip, _ = netip.AddrFromSlice(a.A.To4())
		case *dns.AAAA:
			ip, _ = netip.AddrFromSlice(a.AAAA.To16())
		}
		if ip.IsValid() {
			out = append(out, AddrRecord{IP: ip, TTL: ttl(rr.Header().Ttl)})
		}
	}
	return out, res, nil
}

// lookup asks for name and qtype and returns the answer records of that
// type at the end of the CNAME chain, with the Result.
func (c *Client) lookup(ctx context.Context, name string, qtype uint16) ([]dns.RR, Result, error) {
	fqdn := dns.Fqdn(name)
	if _, ok := dns.IsDomainName(fqdn); !ok || len(fqdn) > 255 {
		return nil, Result{}, &Error{Name: name, Type: dns.TypeToString[qtype], Cause: fmt.Errorf("%w: invalid domain name", ErrServerFailure)}
	}
	r, err := c.exchange(ctx, fqdn, qtype)
	if err != nil {
		return nil, Result{}, &Error{Name: name, Type: dns.TypeToString[qtype], Cause: err}
	}
	rrs, res := parseAnswer(r, fqdn, qtype)
	return rrs, res, nil
}

// parseAnswer picks the records of qtype owned by qname or, through the
// CNAMEs in the answer section (RFC 1034 §3.6.2), by its canonical name.
// Records for other owners are ignored. The answer's TTL is the smallest
// TTL of the records used, CNAMEs included; a negative answer takes the
// negative TTL from the SOA in the authority section (RFC 2308 §5).
func parseAnswer(r *dns.Msg, qname string, qtype uint16) ([]dns.RR, Result) {
	res := Result{NXDomain: r.Rcode == dns.RcodeNameError, Authentic: r.AuthenticatedData}
	target := qname
	minTTL := uint32(math.MaxUint32)
	for range maxCNAMEChain {
		moved := false
		for _, rr := range r.Answer {
			if cn, ok := rr.(*dns.CNAME); ok && qtype != dns.TypeCNAME && strings.EqualFold(cn.Hdr.Name, target) {
				target = cn.Target
				minTTL = min(minTTL, cn.Hdr.Ttl)
				moved = true
				break
			}
		}
		if !moved {
			break
		}
	}
	var out []dns.RR
	for _, rr := range r.Answer {
		h := rr.Header()
		if h.Rrtype == qtype && h.Class == dns.ClassINET && strings.EqualFold(h.Name, target) {
			out = append(out, rr)
			minTTL = min(minTTL, h.Ttl)
		}
	}
	if len(out) > 0 {
		// A CNAME chain that ends in records is a positive answer, even
		// if a server set NXDOMAIN for a name further along.
		res.NXDomain = false
		res.TTL = ttl(minTTL)
		return out, res
	}
	for _, rr := range r.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			res.TTL = ttl(min(soa.Hdr.Ttl, soa.Minttl))
			break
		}
	}
	return nil, res
}

func ttl(s uint32) time.Duration {
	// RFC 2181 §8: a TTL with the top bit set is treated as zero.
	if s > math.MaxInt32 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// HandlerTransport answers queries in-process with a dns.Handler, such as
// a zone this binary serves itself: no socket, no network.
type HandlerTransport struct{ Handler dns.Handler }

// Exchange runs the handler on the query and returns what it wrote.
func (h HandlerTransport) Exchange(ctx context.Context, _ string, query *dns.Msg, _ bool) (*dns.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &memWriter{}
	h.Handler.ServeDNS(w, query.Copy())
	if w.msg == nil {
		return nil, fmt.Errorf("%w: handler wrote no reply", ErrServerFailure)
	}
	return w.msg, nil
}
