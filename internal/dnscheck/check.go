package dnscheck

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"pimail/internal/dkim"
)

// Status is the outcome of one check.
type Status string

// The outcomes.
const (
	OK      Status = "OK"
	Wrong   Status = "WRONG"   // a record is there but not as expected
	Missing Status = "MISSING" // no record
)

// Result is one check.
type Result struct {
	Check  string // what is checked: "MX", "SPF", "DKIM pm202601rsa", …
	Name   string // the DNS name looked up
	Status Status
	Got    string // what is published (OK and Wrong)
	Want   string // what is expected (Wrong and Missing)
}

// String is the one-line report of the check.
func (r Result) String() string {
	switch r.Status {
	case OK:
		return fmt.Sprintf("%-7s %s %s: %s", r.Status, r.Check, r.Name, r.Got)
	case Missing:
		return fmt.Sprintf("%-7s %s %s: want %s", r.Status, r.Check, r.Name, r.Want)
	}
	return fmt.Sprintf("%-7s %s %s: got %s; want %s", r.Status, r.Check, r.Name, r.Got, r.Want)
}

// Failed counts the results that are not OK.
func Failed(rs []Result) int {
	n := 0
	for _, r := range rs {
		if r.Status != OK {
			n++
		}
	}
	return n
}

// Checker compares what the DNS says about a domain with what Expected
// would print for it.
type Checker struct {
	Lookup   Lookuper
	Domain   string
	Hostname string
	DKIM     []dkim.Record // the stored keys' records
	// Addrs, when set, are the addresses the hostname must have; otherwise
	// whatever it has is taken as the server's.
	Addrs []netip.Addr
	// Progress, when set, gets each result as soon as its check is done
	// (a slow resolver then shows progress instead of silence).
	Progress func(Result)
}

// Run makes every check, in the order of Expected.
func (c Checker) Run(ctx context.Context) []Result {
	d, h := strings.ToLower(c.Domain), strings.ToLower(c.Hostname)
	var out []Result
	add := func(r Result) {
		out = append(out, r)
		if c.Progress != nil {
			c.Progress(r)
		}
	}
	add(c.checkMX(ctx, d, h))
	addrRes, addrs := c.checkAddrs(ctx, h)
	add(addrRes)
	for _, a := range addrs {
		add(c.checkPTR(ctx, a, h))
	}
	add(c.checkSPF(ctx, d, h, addrs))
	for _, k := range c.DKIM {
		add(c.checkDKIM(ctx, k))
	}
	add(c.checkTXT(ctx, "DMARC", "_dmarc."+d, "v=DMARC1", "v=DMARC1; p=quarantine; rua=mailto:"+Postmaster(d), checkDMARC))
	add(c.checkTXT(ctx, "MTA-STS", "_mta-sts."+d, "v=STSv1", "v=STSv1; id=<1-32 letters and digits>", checkSTS))
	add(c.checkAlias(ctx, "MTA-STS host", "mta-sts."+d, h, addrs))
	add(c.checkTXT(ctx, "TLS-RPT", "_smtp._tls."+d, "v=TLSRPTv1", "v=TLSRPTv1; rua=mailto:"+Postmaster(d), checkTLSRPT))
	add(c.checkAlias(ctx, "autoconfig", "autoconfig."+d, h, addrs))
	add(c.checkAlias(ctx, "autodiscover", "autodiscover."+d, h, addrs))
	for _, s := range Services {
		add(c.checkSRV(ctx, s, d, h))
	}
	return out
}

func lookupFailed(err error) string { return "no answer (" + err.Error() + ")" }

// checkMX: RFC 5321 §5.1, the domain's MX must name the server.
func (c Checker) checkMX(ctx context.Context, d, h string) Result {
	r := Result{Check: "MX", Name: d, Want: "10 " + h + "."}
	mxs, _, err := c.Lookup.LookupMX(ctx, d)
	if err != nil {
		r.Status, r.Got = Wrong, lookupFailed(err)
		return r
	}
	if len(mxs) == 0 {
		r.Status = Missing
		return r
	}
	var got []string
	ok := false
	for _, m := range mxs {
		host := m.Host
		if host == "" {
			host = "." // null MX, RFC 7505: the domain takes no mail
		}
		got = append(got, fmt.Sprintf("%d %s", m.Preference, host))
		ok = ok || strings.EqualFold(m.Host, h)
	}
	r.Got = strings.Join(got, ", ")
	r.Status = map[bool]Status{true: OK, false: Wrong}[ok]
	return r
}

// checkAddrs: the hostname needs A and/or AAAA records; they are the
// addresses the other checks use.
func (c Checker) checkAddrs(ctx context.Context, h string) (Result, []netip.Addr) {
	r := Result{Check: "A/AAAA", Name: h, Want: "the server's public IPv4 (A) and IPv6 (AAAA) addresses"}
	if len(c.Addrs) > 0 {
		r.Want = joinAddrs(c.Addrs)
	}
	addrs, err := hostAddrs(ctx, c.Lookup, h)
	if err != nil {
		r.Status, r.Got = Wrong, lookupFailed(err)
		return r, c.Addrs
	}
	if len(addrs) == 0 {
		r.Status = Missing
		return r, c.Addrs
	}
	r.Got, r.Status = joinAddrs(addrs), OK
	if len(c.Addrs) > 0 && !sameAddrs(addrs, c.Addrs) {
		r.Status = Wrong
	}
	return r, addrs
}

// checkPTR: receivers check that the client's address has a reverse name
// that resolves back to it (forward-confirmed reverse DNS); it must be the
// server's name.
func (c Checker) checkPTR(ctx context.Context, a netip.Addr, h string) Result {
	r := Result{Check: "PTR", Name: a.String(), Want: h + ". (ask the provider of the address)"}
	names, _, err := c.Lookup.LookupPTR(ctx, a)
	switch {
	case err != nil:
		r.Status, r.Got = Wrong, lookupFailed(err)
	case len(names) == 0:
		r.Status = Missing
	default:
		r.Got = strings.Join(names, ", ")
		r.Status = Wrong
		if slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, h) }) {
			r.Status = OK
		}
	}
	return r
}

// checkSPF: exactly one SPF record (RFC 7208 §4.5), and it must give
// "pass" for every address of the server.
func (c Checker) checkSPF(ctx context.Context, d, h string, addrs []netip.Addr) Result {
	r := Result{Check: "SPF", Name: d, Want: "v=spf1 mx -all"}
	recs, err := c.txt(ctx, d, "v=spf1")
	switch {
	case err != nil:
		r.Status, r.Got = Wrong, lookupFailed(err)
		return r
	case len(recs) == 0:
		r.Status = Missing
		return r
	case len(recs) > 1:
		r.Status, r.Got = Wrong, fmt.Sprintf("%d SPF records (RFC 7208 §4.5: a permanent error)", len(recs))
		return r
	}
	r.Got = recs[0]
	if len(addrs) == 0 {
		r.Status, r.Got = Wrong, recs[0]+" (cannot tell whether it permits the server: "+h+" has no address)"
		return r
	}
	for _, a := range addrs {
		if res := spfPermits(ctx, c.Lookup, a, h, d); res != "pass" {
			r.Status, r.Got = Wrong, fmt.Sprintf("%s, which gives %q for %s", recs[0], res, a)
			return r
		}
	}
	r.Status, r.Got = OK, recs[0]+" (permits "+joinAddrs(addrs)+")"
	return r
}

// checkDKIM: the key record must carry the stored key (RFC 6376 §3.6.1).
func (c Checker) checkDKIM(ctx context.Context, k dkim.Record) Result {
	sel, _, _ := strings.Cut(k.Name, ".")
	r := Result{Check: "DKIM " + sel, Name: k.Name, Want: clip(k.Value)}
	want := tags(k.Value)
	recs, err := c.txt(ctx, k.Name, "")
	switch {
	case err != nil:
		r.Status, r.Got = Wrong, lookupFailed(err)
		return r
	case len(recs) == 0:
		r.Status = Missing
		return r
	}
	for _, rec := range recs {
		t := tags(rec)
		if t["p"] == want["p"] && strings.EqualFold(orDefault(t["k"], "rsa"), want["k"]) {
			r.Status, r.Got = OK, "k="+want["k"]+", key matches the stored one"
			return r
		}
	}
	r.Status, r.Got = Wrong, clip(recs[0])+" (not the stored key)"
	return r
}

// checkTXT checks that exactly one TXT record at name starts with prefix
// and that valid accepts it.
func (c Checker) checkTXT(ctx context.Context, check, name, prefix, want string, valid func(map[string]string) string) Result {
	r := Result{Check: check, Name: name, Want: want}
	recs, err := c.txt(ctx, name, prefix)
	switch {
	case err != nil:
		r.Status, r.Got = Wrong, lookupFailed(err)
	case len(recs) == 0:
		r.Status = Missing
	case len(recs) > 1:
		r.Status, r.Got = Wrong, fmt.Sprintf("%d records (receivers then ignore them all)", len(recs))
	default:
		r.Got = recs[0]
		if problem := valid(tags(recs[0])); problem != "" {
			r.Status, r.Got = Wrong, recs[0]+" ("+problem+")"
		} else {
			r.Status = OK
		}
	}
	return r
}

// checkDMARC: RFC 7489 §6.3, p is required and one of three values.
func checkDMARC(t map[string]string) string {
	switch strings.ToLower(t["p"]) {
	case "none", "quarantine", "reject":
		return ""
	}
	return "no valid p= policy"
}

// checkSTS: RFC 8461 §3.1, id is 1–32 letters and digits.
func checkSTS(t map[string]string) string {
	id := t["id"]
	if id == "" || len(id) > 32 || strings.IndexFunc(id, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) >= 0 {
		return "id must be 1-32 letters and digits"
	}
	return ""
}

// checkTLSRPT: RFC 8460 §3, rua is required.
func checkTLSRPT(t map[string]string) string {
	if t["rua"] == "" {
		return "no rua= report address"
	}
	return ""
}

// checkAlias: name must be a CNAME to the server or have its addresses.
func (c Checker) checkAlias(ctx context.Context, check, name, h string, addrs []netip.Addr) Result {
	r := Result{Check: check, Name: name, Want: "CNAME " + h + "."}
	target, _, err := c.Lookup.LookupCNAME(ctx, name)
	if err != nil {
		r.Status, r.Got = Wrong, lookupFailed(err)
		return r
	}
	if target != "" {
		r.Got = "CNAME " + target + "."
		r.Status = map[bool]Status{true: OK, false: Wrong}[strings.EqualFold(target, h)]
		return r
	}
	got, err := hostAddrs(ctx, c.Lookup, name)
	switch {
	case err != nil:
		r.Status, r.Got = Wrong, lookupFailed(err)
	case len(got) == 0:
		r.Status = Missing
	default:
		r.Got = joinAddrs(got)
		r.Status = Wrong
		if len(addrs) > 0 && sameAddrs(got, addrs) {
			r.Status, r.Got = OK, r.Got+" (the server's addresses)"
		}
	}
	return r
}

// checkSRV: RFC 6186 §3, the service record must point at the server.
func (c Checker) checkSRV(ctx context.Context, s Service, d, h string) Result {
	name := s.Label + "." + d
	r := Result{Check: "SRV", Name: name, Want: fmt.Sprintf("0 1 %d %s.", s.Port, h)}
	srvs, _, err := c.Lookup.LookupSRV(ctx, name)
	switch {
	case err != nil:
		r.Status, r.Got = Wrong, lookupFailed(err)
		return r
	case len(srvs) == 0:
		r.Status = Missing
		return r
	}
	var got []string
	r.Status = Wrong
	for _, v := range srvs {
		got = append(got, v.String())
		if strings.EqualFold(v.Target, h) && v.Port == s.Port {
			r.Status = OK
		}
	}
	r.Got = strings.Join(got, ", ")
	return r
}

// txt returns the TXT texts at name that start with prefix (followed by
// the end, a space or a ';'), case-insensitively; all of them for "".
func (c Checker) txt(ctx context.Context, name, prefix string) ([]string, error) {
	recs, _, err := c.Lookup.LookupTXT(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		t := strings.TrimSpace(r.Text)
		if prefix == "" {
			out = append(out, t)
			continue
		}
		if len(t) >= len(prefix) && strings.EqualFold(t[:len(prefix)], prefix) {
			if rest := t[len(prefix):]; rest == "" || rest[0] == ' ' || rest[0] == ';' {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// tags parses a tag-list ("k=v; k2=v2", RFC 6376 §3.2), lower-casing the
// names and removing white space from the values (which base64 keys may
// contain).
func tags(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		out[strings.ToLower(strings.TrimSpace(k))] = strings.Join(strings.Fields(v), "")
	}
	return out
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func clip(s string) string {
	if len(s) > 72 {
		return s[:72] + "…"
	}
	return s
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x.Unmap()) {
			return false
		}
	}
	return true
}
