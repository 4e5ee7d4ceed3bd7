package msgauth

import (
	"context"

	"pimail/internal/dkim"
)

// DefaultMaxSignatures is how many DKIM signatures of one message are
// verified; the rest are ignored. Each costs a DNS lookup and a pass over
// the body, and a sender needs one or two.
const DefaultMaxSignatures = 5

// DKIMResult is the verification of one DKIM-Signature field
// (RFC 6376 §6.1), in the terms of RFC 8601 §2.7.1.
type DKIMResult struct {
	// Result is pass, fail (the signature or body hash does not verify),
	// policy (valid but not accepted: l= leaves part of the body
	// unsigned), temperror (the key could not be fetched now) or
	// permerror (a malformed signature, no key, an expired signature…).
	// Only pass counts for DMARC.
	Result string
	// Domain is the signing domain (d=, A-labels), Selector its s=,
	// Algorithm its a=.
	Domain, Selector, Algorithm string
	// Identifier is the AUID (i=), "@"+Domain when absent.
	Identifier string
	// BPrefix is the first 8 characters of b=, which tell signatures of
	// the same domain apart in Authentication-Results (RFC 6008 §4).
	BPrefix string
	// Reason explains a result other than pass.
	Reason string
}

// verifyDKIM checks up to max DKIM signatures of raw. A message without
// signatures gives no results (dkim=none).
func (c *Checker) verifyDKIM(ctx context.Context, raw []byte) []DKIMResult {
	vs := dkim.Verify(ctx, c.cfg.Resolver, raw, c.cfg.MaxSignatures, c.now())
	out := make([]DKIMResult, len(vs))
	for i, v := range vs {
		out[i] = DKIMResult{Result: v.Result, Domain: v.Domain, Selector: v.Selector, Algorithm: v.Algorithm,
			Identifier: v.Identifier, BPrefix: v.BPrefix, Reason: v.Reason}
	}
	return out
}

// aggregateDKIM is the one-word summary of all signatures for the spam
// rules: pass when any passes, else fail when any fails, else the first
// signature's result; "none" without signatures.
func aggregateDKIM(rs []DKIMResult) string {
	if len(rs) == 0 {
		return "none"
	}
	for _, want := range []string{"pass", "fail"} {
		for _, r := range rs {
			if r.Result == want {
				return want
			}
		}
	}
	return rs[0].Result
}
