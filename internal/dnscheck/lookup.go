package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

// SRV is one SRV record (RFC 2782). Target is without the final dot; "."
// (the service is not offered, RFC 2782) is kept as ".".
type SRV struct {
	Priority, Weight, Port uint16
	Target                 string
}

func (s SRV) String() string {
	t := s.Target
	if t != "." {
		t += "."
	}
	return fmt.Sprintf("%d %d %d %s", s.Priority, s.Weight, s.Port, t)
}

// Lookuper is the resolver the checks use: pimail's resolver plus the
// record types only these checks need.
type Lookuper interface {
	dnsresolver.Resolver
	LookupSRV(ctx context.Context, name string) ([]SRV, dnsresolver.Result, error)
	// LookupCNAME returns the target of a CNAME at name, "" when there is
	// none.
	LookupCNAME(ctx context.Context, name string) (string, dnsresolver.Result, error)
	// LookupPTR returns the names of an address (RFC 1035 §3.5).
	LookupPTR(ctx context.Context, addr netip.Addr) ([]string, dnsresolver.Result, error)
}

// NewLookuper returns a Lookuper asking the servers of cfg (default: the
// ones in /etc/resolv.conf).
func NewLookuper(cfg dnsresolver.Config) (Lookuper, error) {
	c, err := dnsresolver.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("dnscheck: %w", err)
	}
	l := &lookuper{Client: c, servers: c.Servers(), transport: cfg.Transport, timeout: cfg.Timeout}
	if l.transport == nil {
		l.transport = dnsresolver.NetTransport{}
	}
	if l.timeout <= 0 {
		l.timeout = dnsresolver.DefaultTimeout
	}
	return l, nil
}

// lookuper adds SRV, CNAME and PTR queries to dnsresolver.Client, sent the
// same way (the client's servers and transport, UDP then TCP when
// truncated).
type lookuper struct {
	*dnsresolver.Client
	servers   []string
	transport dnsresolver.Transport
	timeout   time.Duration
}

func (l *lookuper) LookupSRV(ctx context.Context, name string) ([]SRV, dnsresolver.Result, error) {
	rrs, res, err := l.query(ctx, name, dns.TypeSRV)
	var out []SRV
	for _, rr := range rrs {
		s := rr.(*dns.SRV)
		t := strings.TrimSuffix(s.Target, ".")
		if t == "" {
			t = "."
		}
		out = append(out, SRV{Priority: s.Priority, Weight: s.Weight, Port: s.Port, Target: t})
	}
	return out, res, err
}

func (l *lookuper) LookupCNAME(ctx context.Context, name string) (string, dnsresolver.Result, error) {
	rrs, res, err := l.query(ctx, name, dns.TypeCNAME)
	if len(rrs) == 0 {
		return "", res, err
	}
	return strings.TrimSuffix(rrs[0].(*dns.CNAME).Target, "."), res, err
}

func (l *lookuper) LookupPTR(ctx context.Context, addr netip.Addr) ([]string, dnsresolver.Result, error) {
	rev, err := dns.ReverseAddr(addr.Unmap().String())
	if err != nil {
		return nil, dnsresolver.Result{}, fmt.Errorf("dnscheck: reverse name of %s: %w", addr, err)
	}
	rrs, res, err := l.query(ctx, rev, dns.TypePTR)
	var out []string
	for _, rr := range rrs {
		out = append(out, strings.TrimSuffix(rr.(*dns.PTR).Ptr, "."))
	}
	return out, res, err
}

// query asks each server in turn (two rounds) and returns the records of
// qtype at name or, through CNAMEs in the answer (RFC 1034 §3.6.2; RFC 2317
// delegates reverse zones that way), at its canonical name.
func (l *lookuper) query(ctx context.Context, name string, qtype uint16) ([]dns.RR, dnsresolver.Result, error) {
	fqdn := dns.Fqdn(name)
	var lastErr error
	for range 2 {
		for _, server := range l.servers {
			r, err := l.exchange(ctx, server, fqdn, qtype)
			if err != nil {
				lastErr = err
				if ctx.Err() != nil {
					break
				}
				continue
			}
			return answer(r, fqdn, qtype)
		}
	}
	if lastErr == nil {
		lastErr = errors.New("no DNS server to ask")
	}
	return nil, dnsresolver.Result{}, &dnsresolver.Error{Name: name, Type: dns.TypeToString[qtype], Cause: lastErr}
}

func (l *lookuper) exchange(ctx context.Context, server, fqdn string, qtype uint16) (*dns.Msg, error) {
	actx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	q := new(dns.Msg)
	q.SetQuestion(fqdn, qtype)
	q.RecursionDesired = true
	q.SetEdns0(dnsresolver.DefaultUDPSize, false)
	r, err := l.transport.Exchange(actx, server, q, false)
	if err == nil && r != nil && r.Truncated {
		q.Id = dns.Id()
		r, err = l.transport.Exchange(actx, server, q, true) // RFC 7766 §6.1
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", server, err)
	}
	// RFC 1035 §4.1.1: the reply must answer this query.
	if r == nil || !r.Response || r.Id != q.Id || len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, fqdn) {
		return nil, fmt.Errorf("%s: %w: reply does not match the query", server, dnsresolver.ErrServerFailure)
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return nil, fmt.Errorf("%s: %w: rcode %s", server, dnsresolver.ErrServerFailure, dns.RcodeToString[r.Rcode])
	}
	return r, nil
}

func answer(r *dns.Msg, fqdn string, qtype uint16) ([]dns.RR, dnsresolver.Result, error) {
	res := dnsresolver.Result{NXDomain: r.Rcode == dns.RcodeNameError, Authentic: r.AuthenticatedData}
	target := fqdn
	for range 8 { // bounded CNAME chain
		moved := false
		for _, rr := range r.Answer {
			if cn, ok := rr.(*dns.CNAME); ok && qtype != dns.TypeCNAME && strings.EqualFold(cn.Hdr.Name, target) {
				target, moved = cn.Target, true
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
		if h.Rrtype == qtype && strings.EqualFold(h.Name, target) {
			out = append(out, rr)
		}
	}
	if len(out) > 0 {
		res.NXDomain = false
	}
	return out, res, nil
}
