package smtpserver

import (
	"context"
	"fmt"
	"strings"

	"pimail/internal/dnsresolver"
)

// zoneResolver sends each query to the resolver of the zone it falls in,
// as a recursive resolver would find each zone's server.
type zoneResolver map[string]dnsresolver.Resolver

func (z zoneResolver) pick(name string) (dnsresolver.Resolver, error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	best := ""
	for zone := range z {
		if (name == zone || strings.HasSuffix(name, "."+zone)) && len(zone) > len(best) {
			best = zone
		}
	}
	if best == "" {
		return nil, fmt.Errorf("no server for %s: %w", name, dnsresolver.ErrServerFailure)
	}
	return z[best], nil
}

func (z zoneResolver) LookupA(ctx context.Context, name string) ([]dnsresolver.AddrRecord, dnsresolver.Result, error) {
	r, err := z.pick(name)
	if err != nil {
		return nil, dnsresolver.Result{}, err
	}
	return r.LookupA(ctx, name)
}

func (z zoneResolver) LookupAAAA(ctx context.Context, name string) ([]dnsresolver.AddrRecord, dnsresolver.Result, error) {
	r, err := z.pick(name)
	if err != nil {
		return nil, dnsresolver.Result{}, err
	}
	return r.LookupAAAA(ctx, name)
}

func (z zoneResolver) LookupTXT(ctx context.Context, name string) ([]dnsresolver.TXTRecord, dnsresolver.Result, error) {
	r, err := z.pick(name)
	if err != nil {
		return nil, dnsresolver.Result{}, err
	}
	return r.LookupTXT(ctx, name)
}

func (z zoneResolver) LookupMX(ctx context.Context, name string) ([]dnsresolver.MXRecord, dnsresolver.Result, error) {
	r, err := z.pick(name)
	if err != nil {
		return nil, dnsresolver.Result{}, err
	}
	return r.LookupMX(ctx, name)
}
