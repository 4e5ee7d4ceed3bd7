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
		strs := make([]string, len(t.Txt))
		for i, s := range t.Txt {
			strs[i] = txtOctets(s)
		}
		out = append(out, TXTRecord{Strings: strs, Text: strings.Join(strs, ""), TTL: ttl(t.Hdr.Ttl)})
	}
	return out, res, nil
}

// txtOctets undoes the escaping miekg/dns applies to a character-string
// it unpacks (RFC 1035 §5.1 presentation format: "\\X" for a quote or a
// backslash, "\\DDD" for an octet outside printable ASCII), so callers get
// the octets that were sent: a record with UTF-8 or control characters
// reads as it is, and SPF can refuse it for that (RFC 7208 §3.1).
func txtOctets(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b = append(b, c)
			continue
		}
		if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			n := int(s[i+1]-'0')*100 + int(s[i+2]-'0')*10 + int(s[i+3]-'0')
			if n <= 255 {
				b = append(b, byte(n))
				i += 3
				continue
			}
		}
		b = append(b, s[i+1])
		i++
	}
	return string(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

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

// LookupPTR returns the names an address points back to (RFC 1035 §3.5,
// RFC 3596 §2.5), without the trailing dot, in presentation format.
func (c *Client) LookupPTR(ctx context.Context, addr netip.Addr) ([]string, Result, error) {
	rev, err := dns.ReverseAddr(addr.Unmap().String())
	if err != nil {
		return nil, Result{}, &Error{Name: addr.String(), Type: "PTR", Cause: fmt.Errorf("%w: %w", ErrServerFailure, err)}
	}
	rrs, res, err := c.lookup(ctx, rev, dns.TypePTR)
	if err != nil {
		return nil, res, err
	}
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, strings.TrimSuffix(rr.(*dns.PTR).Ptr, "."))
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
	fqdn, err := CanonicalName(name)
	if err != nil {
		return nil, Result{}, &Error{Name: name, Type: dns.TypeToString[qtype], Cause: fmt.Errorf("%w: %w", ErrInvalidName, err)}
	}
	r, err := c.exchange(ctx, fqdn, qtype)
	if err != nil {
		return nil, Result{}, &Error{Name: name, Type: dns.TypeToString[qtype], Cause: err}
	}
	rrs, res := parseAnswer(r, fqdn, qtype)
	return rrs, res, nil
}

// CanonicalName returns name as miekg/dns writes the names of a reply:
// fully qualified, every octet that presentation format escapes escaped
// the same way (RFC 1035 §5.1: "\\X" and "\\DDD"), so that names of the
// query and of the reply compare as strings (ASCII case-insensitively,
// RFC 4343). name is in presentation format: a backslash escapes the
// next character or starts a decimal triple, and every other octet
// stands for itself — a space, a quote, "@", ";", parentheses or UTF-8
// (RFC 2181 §11: any octet may be in a label). It fails for a name that
// cannot be sent: an empty label, a label over 63 octets, more than 255
// octets in all (RFC 1035 §2.3.4).
func CanonicalName(name string) (string, error) {
	if name == "" || name == "." {
		return ".", nil
	}
	fqdn := name
	if !dns.IsFqdn(fqdn) {
		fqdn += "."
	}
	buf := make([]byte, 256+len(fqdn))
	n, err := dns.PackDomainName(fqdn, buf, 0, nil, false)
	if err != nil {
		return "", fmt.Errorf("name %q: %w", name, err)
	}
	if n > 255 {
		return "", fmt.Errorf("name %q: longer than 255 octets", name)
	}
	out, _, err := dns.UnpackDomainName(buf[:n], 0)
	if err != nil {
		return "", fmt.Errorf("name %q: %w", name, err)
	}
	return out, nil
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
