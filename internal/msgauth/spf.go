package msgauth

import (
	"context"
	"net/netip"
	"strings"

	"pimail/internal/message"
	"pimail/internal/spf"
)

// SPFResult is the outcome of the SPF check of one message (RFC 7208 §2.6).
type SPFResult struct {
	// Result is one of none, neutral, pass, fail, softfail, temperror,
	// permerror (RFC 7208 §2.6; RFC 8601 §2.7.2).
	Result string
	// Domain is the identity checked, in A-labels: the MAIL FROM domain,
	// or the HELO name when the reverse-path is null (RFC 7208 §2.4).
	// DMARC aligns it with the From domain (RFC 7489 §3.1.2).
	Domain string
	// Identity says which one: "mailfrom" or "helo".
	Identity string
	// Reason is a short explanation for a result other than pass, for
	// logs and the Authentication-Results comment.
	Reason string
}

// checkSPF evaluates the sender's SPF record for the client IP (package
// spf: RFC 7208 check_host with its limits).
//
// RFC 7208 §2.4: the "MAIL FROM" identity is checked; for the null
// reverse-path the identity is "postmaster@" the HELO name. The separate
// HELO check of §2.3 is not made: DMARC does not use it and it would cost
// another round of lookups. An internationalized domain is checked in
// A-labels (RFC 8616 §4); the local part (%{l}) stays as written.
func (c *Checker) checkSPF(ctx context.Context, ip netip.Addr, helo, mailFrom string) SPFResult {
	sender, identity := mailFrom, "mailfrom"
	if sender == "" {
		sender, identity = "postmaster@"+helo, "helo"
	}
	raw := message.DomainOf(sender)
	out := SPFResult{Domain: raw, Identity: identity}
	domain, ok := message.ASCIIDomain(raw)
	if ok {
		out.Domain = domain
		sender = message.LocalPart(sender) + "@" + domain
	}
	if !ip.IsValid() {
		out.Result, out.Reason = "none", "no client address"
		return out
	}
	if !ok {
		// RFC 7208 §4.3: a malformed domain gives none.
		out.Result, out.Reason = "none", "no valid domain to check"
		return out
	}
	o := spf.Check(ctx, c.cfg.Resolver, spf.Request{IP: ip, Sender: sender, Helo: helo, Receiver: c.cfg.AuthservID})
	out.Result = string(o.Result)
	switch o.Result {
	case spf.Pass:
	case spf.Fail, spf.Softfail, spf.Neutral:
		// The mechanism's name only: its argument is the sender's text.
		name, _, _ := strings.Cut(strings.TrimLeft(o.Mechanism, "+-~?"), ":")
		name, _, _ = strings.Cut(name, "/")
		out.Reason = "matched " + name
	default:
		out.Reason = o.Reason
	}
	return out
}
