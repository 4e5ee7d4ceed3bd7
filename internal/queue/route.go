package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// routeError is a failure to find where a domain's mail goes.
type routeError struct {
	perm   bool
	status string // enhanced status code (RFC 3463)
	msg    string
}

func (e *routeError) Error() string { return e.msg }

func (e *routeError) result() rcptResult {
	return rcptResult{perm: e.perm, reply: e.msg, status: e.status}
}

// route is how mail for one domain is sent.
type route struct {
	hosts     []string   // MX hosts (or the domain itself), in order of preference
	transport *Transport // a configured override; hosts is then unused
	policy    *stsPolicy // MTA-STS policy in enforce mode, or nil
}

// transportFor returns the override for a domain, or nil.
func (q *Queue) transportFor(domain string) *Transport {
	if t, ok := q.cfg.Transports[domain]; ok {
		return &t
	}
	if t, ok := q.cfg.Transports["*"]; ok {
		return &t
	}
	return nil
}

// route finds the MX hosts of domain (RFC 5321 §5.1).
func (q *Queue) route(ctx context.Context, domain string) (route, error) {
	if t := q.transportFor(domain); t != nil {
		return route{transport: t}, nil
	}
	mxs, res, err := q.dns.LookupMX(ctx, domain)
	if err != nil {
		return route{}, &routeError{status: "4.4.3", msg: fmt.Sprintf("MX lookup for %s failed: %v", domain, err)}
	}
	var hosts []string
	switch {
	case len(mxs) == 0 && res.NXDomain:
		return route{}, &routeError{perm: true, status: "5.1.2", msg: fmt.Sprintf("domain %s does not exist", domain)}
	case len(mxs) == 0:
		// No MX: the domain itself is the implicit MX (RFC 5321 §5.1).
		hosts = []string{domain}
	default:
		for _, mx := range mxs {
			// RFC 7505 §3: a null MX ("0 .") says the domain accepts
			// no mail; §4.1: fail at once with 5.1.10.
			if mx.Host == "" || mx.Host == "." {
				return route{}, &routeError{perm: true, status: "5.1.10", msg: fmt.Sprintf("domain %s accepts no mail (null MX, RFC 7505)", domain)}
			}
		}
		// Lowest preference first; equal preferences in random order
		// (RFC 5321 §5.1) to spread the load.
		rand.Shuffle(len(mxs), func(i, j int) { mxs[i], mxs[j] = mxs[j], mxs[i] })
		sort.SliceStable(mxs, func(i, j int) bool { return mxs[i].Preference < mxs[j].Preference })
		for _, mx := range mxs {
			hosts = append(hosts, strings.ToLower(strings.TrimSuffix(mx.Host, ".")))
		}
	}
	r := route{hosts: hosts}
	if !q.cfg.DisableMTASTS {
		p := q.mtaSTS(ctx, domain)
		if p != nil && p.mode == "enforce" {
			// RFC 8461 §5.1: only MX hosts that match the policy.
			var ok []string
			for _, h := range hosts {
				if p.matches(h) {
					ok = append(ok, h)
				} else {
					q.log.Warn("MTA-STS: MX host does not match the policy; skipped", "domain", domain, "mx", h)
				}
			}
			if len(ok) == 0 {
				// §5.1: not a permanent failure; the policy may change.
				return route{}, &routeError{status: "4.7.5", msg: fmt.Sprintf("MTA-STS policy of %s matches none of its MX hosts", domain)}
			}
			r.hosts, r.policy = ok, p
		} else if p != nil && p.mode == "testing" {
			for _, h := range hosts {
				if !p.matches(h) {
					q.log.Warn("MTA-STS (testing): MX host does not match the policy", "domain", domain, "mx", h)
				}
			}
		}
	}
	return r, nil
}

// targets lists the servers to try for a route, in order.
func (q *Queue) targets(ctx context.Context, r route) ([]target, error) {
	if t := r.transport; t != nil {
		host, _, err := net.SplitHostPort(t.Host)
		if err != nil {
			return nil, &routeError{status: "4.3.5", msg: "transport host is not host:port"}
		}
		mode := tlsOpportunistic
		switch {
		case t.ImplicitTLS:
			mode = tlsImplicit
		case t.RequireTLS:
			mode = tlsRequired
		}
		return []target{{host: host, addr: t.Host, mode: mode, auth: t}}, nil
	}
	mode := tlsOpportunistic
	if r.policy != nil {
		mode = tlsRequired // RFC 8461 §4.2: valid TLS with the MX
	}
	port := strconv.Itoa(q.cfg.SMTPPort)
	var out []target
	var lastErr error
	for _, h := range r.hosts {
		addrs, err := q.lookupHost(ctx, h)
		if err != nil {
			lastErr = err
			continue
		}
		for _, a := range addrs {
			out = append(out, target{host: h, addr: net.JoinHostPort(a.String(), port), mode: mode})
		}
	}
	if len(out) == 0 {
		if lastErr == nil {
			lastErr = fmt.Errorf("no addresses")
		}
		return nil, &routeError{status: "4.4.4", msg: fmt.Sprintf("no usable address for the mail servers: %v", lastErr)}
	}
	return out, nil
}

// lookupHost returns the IPv4 then the IPv6 addresses of a host.
func (q *Queue) lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	var out []netip.Addr
	a, _, errA := q.dns.LookupA(ctx, host)
	for _, r := range a {
		out = append(out, r.IP)
	}
	aaaa, _, errAAAA := q.dns.LookupAAAA(ctx, host)
	for _, r := range aaaa {
		out = append(out, r.IP)
	}
	if len(out) == 0 {
		if errA != nil {
			return nil, errA
		}
		if errAAAA != nil {
			return nil, errAAAA
		}
		return nil, fmt.Errorf("%s has no address", host)
	}
	return out, nil
}
