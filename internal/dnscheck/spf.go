package dnscheck

import (
	"context"
	"errors"
	"net"
	"net/netip"

	"blitiri.com.ar/go/spf"

	"pimail/internal/dnsresolver"
)

// spfPermits evaluates the domain's SPF policy (RFC 7208 §4) for mail from
// ip sent by the server (HELO hostname, MAIL FROM postmaster@domain) and
// returns the result: "pass" when the record permits the server.
func spfPermits(ctx context.Context, l Lookuper, ip netip.Addr, hostname, domain string) string {
	res, _ := spf.CheckHostWithSender(net.IP(ip.Unmap().AsSlice()), hostname, Postmaster(domain),
		spf.WithContext(ctx), spf.WithResolver(spfLookups{l}))
	return string(res)
}

// spfLookups gives the SPF library the *net.Resolver-like interface it
// expects; it tells "no such name" from failures by *net.DNSError.
type spfLookups struct{ l Lookuper }

func (s spfLookups) LookupTXT(ctx context.Context, name string) ([]string, error) {
	recs, res, err := s.l.LookupTXT(ctx, name)
	if err != nil {
		return nil, tempError(name, err)
	}
	if res.NXDomain {
		return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Text
	}
	return out, nil
}

func (s spfLookups) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	recs, res, err := s.l.LookupMX(ctx, name)
	if err != nil {
		return nil, tempError(name, err)
	}
	if res.NXDomain {
		return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	var out []*net.MX
	for _, r := range recs {
		if r.Host != "" {
			out = append(out, &net.MX{Host: r.Host, Pref: r.Preference})
		}
	}
	return out, nil
}

func (s spfLookups) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	addrs, err := hostAddrs(ctx, s.l, host)
	if err != nil {
		return nil, tempError(host, err)
	}
	out := make([]net.IPAddr, len(addrs))
	for i, a := range addrs {
		out[i] = net.IPAddr{IP: net.IP(a.AsSlice())}
	}
	return out, nil
}

func (s spfLookups) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, &net.DNSError{Err: "bad address", Name: addr}
	}
	names, _, err := s.l.LookupPTR(ctx, ip)
	if err != nil {
		return nil, tempError(addr, err)
	}
	return names, nil
}

func tempError(name string, err error) error {
	return &net.DNSError{Err: err.Error(), Name: name, IsTemporary: true,
		IsTimeout: errors.Is(err, dnsresolver.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)}
}

// hostAddrs returns the A and AAAA addresses of host.
func hostAddrs(ctx context.Context, l Lookuper, host string) ([]netip.Addr, error) {
	v4, _, err4 := l.LookupA(ctx, host)
	v6, _, err6 := l.LookupAAAA(ctx, host)
	var out []netip.Addr
	for _, r := range append(v4, v6...) {
		out = append(out, r.IP.Unmap())
	}
	if len(out) == 0 && (err4 != nil || err6 != nil) {
		return nil, errors.Join(err4, err6)
	}
	return out, nil
}
