package msgauth

import (
	"context"
	"errors"
	"net"
	"strings"

	"pimail/internal/dnsresolver"
)

// spfResolver adapts a dnsresolver.Resolver to the interface the SPF
// library asks for (it mirrors *net.Resolver). The library tells "no
// such record" from "lookup failed" by the *net.DNSError it gets back, so
// every answer is translated into that form here:
//
//   - NXDOMAIN: IsNotFound (RFC 7208 §4.3: "none" for the checked domain;
//     a void lookup in mechanisms, §4.6.4);
//   - NODATA: an empty answer and no error (also a void lookup);
//   - timeout, SERVFAIL, a cancelled context: IsTemporary, which the
//     library turns into "temperror" (§2.6.6).
type spfResolver struct {
	r dnsresolver.Resolver
}

func (a spfResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	recs, res, err := a.r.LookupTXT(ctx, name)
	if err != nil {
		return nil, dnsError(name, err)
	}
	if res.NXDomain {
		return nil, notFound(name)
	}
	out := make([]string, len(recs))
	for i, rec := range recs {
		out[i] = rec.Text // RFC 7208 §3.3: the strings are concatenated
	}
	return out, nil
}

func (a spfResolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	recs, res, err := a.r.LookupMX(ctx, name)
	if err != nil {
		return nil, dnsError(name, err)
	}
	if res.NXDomain {
		return nil, notFound(name)
	}
	out := make([]*net.MX, 0, len(recs))
	for _, rec := range recs {
		if rec.Host == "" {
			continue // null MX (RFC 7505): no host to match
		}
		out = append(out, &net.MX{Host: rec.Host, Pref: rec.Preference})
	}
	return out, nil
}

// LookupIPAddr asks for A and AAAA. The name is not found only when both
// say so; one answer is enough when the other family fails.
func (a spfResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	v4, res4, err4 := a.r.LookupA(ctx, host)
	if err4 == nil && res4.NXDomain {
		// RFC 8020: below a nonexistent name nothing exists, so the
		// AAAA query would only cost time.
		return nil, notFound(host)
	}
	v6, _, err6 := a.r.LookupAAAA(ctx, host)
	var out []net.IPAddr
	for _, rec := range append(v4, v6...) {
		out = append(out, net.IPAddr{IP: net.IP(rec.IP.AsSlice())})
	}
	if len(out) > 0 {
		return out, nil
	}
	if err4 != nil {
		return nil, dnsError(host, err4)
	}
	if err6 != nil {
		return nil, dnsError(host, err6)
	}
	return nil, nil
}

// LookupAddr is the reverse lookup of the "ptr" mechanism and the %{p}
// macro. The resolver interface has no PTR query, and RFC 7208 §5.5 says
// "ptr" SHOULD NOT be published; a failed reverse lookup makes the
// mechanism not match (§5.5), which is what this answer does, without
// counting as a void lookup.
func (a spfResolver) LookupAddr(_ context.Context, addr string) ([]string, error) {
	return nil, &net.DNSError{Err: "reverse lookups are not supported", Name: addr, IsTemporary: true}
}

// dnsError turns a failed lookup into a temporary *net.DNSError: every
// failure of the resolver (timeout, server failure, the end of the
// message's deadline) is worth another try later.
func dnsError(name string, err error) error {
	return &net.DNSError{
		Err:         err.Error(),
		Name:        name,
		IsTimeout:   errors.Is(err, dnsresolver.ErrTimeout) || errors.Is(err, context.DeadlineExceeded),
		IsTemporary: true,
	}
}

func notFound(name string) error {
	return &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// txtLookup is a LookupTXT for the DKIM library, bound to ctx (the
// library's callback has no context). DKIM keys live at
// selector._domainkey.domain (RFC 6376 §3.6.2.1).
func txtLookup(ctx context.Context, r dnsresolver.Resolver) func(string) ([]string, error) {
	a := spfResolver{r: r}
	return func(name string) ([]string, error) {
		return a.LookupTXT(ctx, strings.TrimSuffix(name, "."))
	}
}
