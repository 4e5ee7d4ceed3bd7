package msgauth

import (
	"context"
	"net"
	"strings"

	"blitiri.com.ar/go/spf"
	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

// SPFResult is the outcome of the SPF check of one message (RFC 7208 §2.6).
type SPFResult struct {
	// Result is one of none, neutral, pass, fail, softfail, temperror,
	// permerror (RFC 7208 §2.6; RFC 8601 §2.7.2).
	Result string
	// Domain is the identity checked: the MAIL FROM domain, or the HELO
	// name when the reverse-path is null (RFC 7208 §2.4). DMARC aligns it
	// with the From domain (RFC 7489 §3.1.2).
	Domain string
	// Identity says which one: "mailfrom" or "helo".
	Identity string
	// Reason is a short explanation for a result other than pass, for
	// logs and the Authentication-Results comment.
	Reason string
}

// checkSPF evaluates the sender's SPF record for the client IP.
//
// RFC 7208 §2.4: the "MAIL FROM" identity is checked; for the null
// reverse-path the identity is "postmaster@" the HELO name. The separate
// HELO check of §2.3 is not made: DMARC does not use it and it would cost
// another round of lookups. The library enforces the limits of §4.6.4: at
// most 10 mechanisms and modifiers that cause DNS lookups, and at most 2
// void lookups.
func checkSPF(ctx context.Context, r dnsresolver.Resolver, ip net.IP, helo, mailFrom string) SPFResult {
	sender, identity := mailFrom, "mailfrom"
	if sender == "" {
		sender, identity = "postmaster@"+helo, "helo"
	}
	_, domain := splitAddr(sender)
	out := SPFResult{Domain: domain, Identity: identity}
	// RFC 7208 §4.3: a domain that is not a valid, fully qualified domain
	// name (an address literal in HELO, a single label) yields "none".
	if !validDomain(domain) {
		out.Result, out.Reason = "none", "no valid domain to check"
		return out
	}
	if ip == nil {
		out.Result, out.Reason = "none", "no client address"
		return out
	}
	res, err := spf.CheckHostWithSender(ip, helo, sender,
		spf.WithContext(ctx),
		spf.WithResolver(spfResolver{r: r}))
	out.Result = string(res)
	if res != spf.Pass && err != nil {
		out.Reason = spfReason(err)
	}
	return out
}

// spfReason keeps the library's error short and free of record contents
// (they are the sender's, and end up in a header).
func spfReason(err error) string {
	switch err {
	case spf.ErrNoResult:
		return "no SPF record"
	case spf.ErrMatchedAll, spf.ErrMatchedA, spf.ErrMatchedIP, spf.ErrMatchedMX, spf.ErrMatchedPTR, spf.ErrMatchedExists:
		return err.Error()
	case spf.ErrLookupLimitReached, spf.ErrVoidLookupLimitReached, spf.ErrMultipleRecords, spf.ErrTooManyMXRecords:
		return err.Error()
	}
	if de, ok := err.(*net.DNSError); ok && de.Temporary() {
		return "DNS lookup failed"
	}
	return "invalid SPF record"
}

// splitAddr splits local@domain at the last "@" and lower-cases the domain.
func splitAddr(addr string) (local, domain string) {
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return addr, ""
	}
	return addr[:i], strings.ToLower(strings.TrimSuffix(addr[i+1:], "."))
}

// validDomain accepts a DNS name of at least two labels: what SPF and
// DMARC can look up.
func validDomain(d string) bool {
	if d == "" || len(d) > 253 || !strings.Contains(d, ".") || strings.HasPrefix(d, "[") {
		return false
	}
	_, ok := dns.IsDomainName(d)
	return ok
}
