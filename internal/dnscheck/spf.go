package dnscheck

import (
	"context"
	"errors"
	"net/netip"

	"pimail/internal/spf"
)

// spfPermits evaluates the domain's SPF policy (RFC 7208 §4, package
// spf, the same check inbound mail gets) for mail from ip sent by the
// server (HELO hostname, MAIL FROM postmaster@domain) and returns the
// result: "pass" when the record permits the server.
func spfPermits(ctx context.Context, l Lookuper, ip netip.Addr, hostname, domain string) string {
	return string(spf.Check(ctx, l, spf.Request{IP: ip, Sender: Postmaster(domain), Helo: hostname}).Result)
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
