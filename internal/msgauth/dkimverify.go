package msgauth

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/emersion/go-msgauth/dkim"

	"pimail/internal/dnsresolver"
)

// DefaultMaxSignatures is how many DKIM signatures of one message are
// verified; the rest are ignored. Each costs a DNS lookup and a pass over
// the body, and a sender needs one or two.
const DefaultMaxSignatures = 5

// DKIMResult is the verification of one DKIM-Signature field
// (RFC 6376 §6.1), in the terms of RFC 8601 §2.7.1.
type DKIMResult struct {
	// Result is pass, fail (the signature or body hash does not verify),
	// neutral, temperror (the key could not be fetched now) or permerror
	// (a malformed signature, no key, an expired signature…).
	Result string
	// Domain is the signing domain (d=), Selector its s=, Algorithm its a=.
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
func verifyDKIM(ctx context.Context, r dnsresolver.Resolver, raw []byte, max int) []DKIMResult {
	sigs := signatureFields(raw, max)
	if len(sigs) == 0 {
		return nil
	}
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{
		LookupTXT:        txtLookup(ctx, r),
		MaxVerifications: max,
	})
	if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
		// An unexpected failure (the header could not be read): the
		// library's per-signature answers cannot be trusted, so every
		// signature counts as broken.
		out := make([]DKIMResult, len(sigs))
		for i, s := range sigs {
			s.Result, s.Reason = "permerror", "message cannot be verified"
			out[i] = s
		}
		return out
	}
	out := make([]DKIMResult, 0, len(verifs))
	for i, v := range verifs {
		var d DKIMResult
		// The library returns its verifications in header order, which
		// signatureFields follows too; the domain check guards against
		// the two reading the header differently.
		if i < len(sigs) && strings.EqualFold(sigs[i].Domain, v.Domain) {
			d = sigs[i]
		}
		d.Domain = strings.ToLower(v.Domain)
		d.Identifier = v.Identifier
		d.Result, d.Reason = dkimResult(v.Err)
		out = append(out, d)
	}
	return out
}

// dkimResult maps the library's verdict onto RFC 8601 §2.7.1 result names.
func dkimResult(err error) (result, reason string) {
	switch {
	case err == nil:
		return "pass", ""
	case dkim.IsTempFail(err):
		return "temperror", "key unavailable"
	case dkim.IsPermFail(err):
		return "permerror", strings.TrimPrefix(err.Error(), "dkim: ")
	default: // the signature or the body hash does not verify
		return "fail", strings.TrimPrefix(err.Error(), "dkim: ")
	}
}

// signatureFields reads the tags of the first max DKIM-Signature fields,
// in header order.
func signatureFields(raw []byte, max int) []DKIMResult {
	var out []DKIMResult
	for _, f := range headerFields(raw) {
		if !strings.EqualFold(f.name, "DKIM-Signature") {
			continue
		}
		if len(out) == max {
			break
		}
		tags := tagList(f.value)
		b := stripWSP(tags["b"])
		if len(b) > 8 {
			b = b[:8]
		}
		out = append(out, DKIMResult{
			Domain:    strings.ToLower(tags["d"]),
			Selector:  tags["s"],
			Algorithm: strings.ToLower(tags["a"]),
			BPrefix:   b,
		})
	}
	return out
}

func stripWSP(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, s)
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
