package msgauth

import (
	"context"
	"strconv"
	"strings"

	"pimail/internal/dnsresolver"
	"pimail/internal/message"
)

// DMARC policies (RFC 7489 §6.3, tag p).
const (
	PolicyNone       = "none"
	PolicyQuarantine = "quarantine"
	PolicyReject     = "reject"
)

// DMARCResult is the DMARC evaluation of one message (RFC 7489 §6.6).
type DMARCResult struct {
	// Result is pass, fail, none (no policy published, or no usable From
	// domain), temperror (the policy could not be fetched) or permerror
	// (RFC 8601 §2.7.7 with RFC 7489 §11.2).
	Result string
	// FromDomain is the RFC5322.From domain evaluated.
	FromDomain string
	// Policy is the policy that applies to FromDomain: p, or sp when the
	// record was found at the organizational domain and has one (§6.6.3).
	Policy string
	// Disposition is what to do with a failing message after pct
	// sampling (§6.6.4): none, quarantine or reject. It is "none" for
	// every result but fail.
	Disposition string
	// Reason explains a result other than pass.
	Reason string
}

// dmarcRecord holds the tags of a DMARC record this server acts on.
type dmarcRecord struct {
	p, sp        string
	adkim, aspf  byte // 'r' or 's'
	pct          int
	fromOrgLevel bool // found at the organizational domain, not the From domain
}

// evaluateDMARC applies the From domain's policy to the SPF and DKIM
// results (RFC 7489 §6.6.2, §6.6.3). sample returns a number in [0, 100)
// for the pct tag.
func evaluateDMARC(ctx context.Context, r dnsresolver.Resolver, fromDomain string, spfRes SPFResult, dkimRes []DKIMResult, sample func() int) DMARCResult {
	out := DMARCResult{FromDomain: fromDomain, Disposition: PolicyNone}
	rec, res := lookupDMARC(ctx, r, fromDomain)
	if rec == nil {
		out.Result, out.Reason = res, map[string]string{
			"none":      "no DMARC record",
			"temperror": "DNS lookup failed",
		}[res]
		return out
	}
	out.Policy = rec.p
	if rec.fromOrgLevel && rec.sp != "" {
		out.Policy = rec.sp
	}

	// §3.1: an identifier is aligned when it is the From domain, or
	// (relaxed mode) shares its organizational domain.
	if spfRes.Result == "pass" && aligned(spfRes.Domain, fromDomain, rec.aspf) {
		out.Result = "pass"
		return out
	}
	for _, d := range dkimRes {
		if d.Result == "pass" && aligned(d.Domain, fromDomain, rec.adkim) {
			out.Result = "pass"
			return out
		}
	}
	out.Result, out.Reason = "fail", "no aligned SPF or DKIM pass"

	// §6.6.4: with pct below 100 only that share of failing mail gets the
	// policy; the rest gets the next weaker one.
	out.Disposition = out.Policy
	if rec.pct < 100 && sample() >= rec.pct {
		switch out.Policy {
		case PolicyReject:
			out.Disposition = PolicyQuarantine
		case PolicyQuarantine:
			out.Disposition = PolicyNone
		}
	}
	return out
}

// lookupDMARC finds the policy record for domain (RFC 7489 §6.6.3). It
// returns the record, or nil and "none" or "temperror":
//
//  1. the DMARC records at _dmarc.<domain> (TXT records starting with
//     v=DMARC1; others are discarded);
//  2. only if there are none, those at _dmarc.<organizational domain>;
//  3. more than one record, or none, at the level where the search
//     stopped: no policy (no fallback to the other level);
//  4. a record with an invalid p=, or an sp= that is present but
//     invalid: p=none when it has a rua= reporting URI, else no policy.
func lookupDMARC(ctx context.Context, r dnsresolver.Resolver, domain string) (*dmarcRecord, string) {
	found, res := dmarcAt(ctx, r, domain)
	fromOrg := false
	if len(found) == 0 && res == "" {
		if org := message.OrgDomain(domain); org != domain {
			found, res = dmarcAt(ctx, r, org)
			fromOrg = true
		}
	}
	if res != "" {
		return nil, res
	}
	if len(found) != 1 {
		return nil, "none"
	}
	rec, ok := parseDMARC(found[0])
	if !ok {
		return nil, "none"
	}
	rec.fromOrgLevel = fromOrg
	return rec, ""
}

// dmarcAt returns the DMARC records at _dmarc.<domain> (§6.6.3 steps 1
// and 2: TXT records that do not start with "v=DMARC1" are discarded),
// or "temperror" when the lookup failed. A name that does not exist has
// none.
func dmarcAt(ctx context.Context, r dnsresolver.Resolver, domain string) ([]string, string) {
	txts, _, err := r.LookupTXT(ctx, "_dmarc."+domain)
	if err != nil {
		return nil, "temperror"
	}
	var found []string
	for _, t := range txts {
		if isDMARCRecord(t.Text) {
			found = append(found, t.Text)
		}
	}
	return found, ""
}

// isDMARCRecord: the record starts with the version tag, v=DMARC1
// (§6.4: "v" MUST be first; its value MUST match precisely).
func isDMARCRecord(s string) bool {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) != "v" {
		return false
	}
	v, _, _ = strings.Cut(v, ";")
	return strings.TrimSpace(v) == "DMARC1"
}

// parseDMARC reads the tags that decide a disposition (§6.3). Unknown tags
// are ignored. A record with a missing or invalid p, or with an sp that
// is present but invalid, is discarded unless it has a valid rua, in
// which case it counts as p=none (§6.6.3 step 6).
func parseDMARC(s string) (*dmarcRecord, bool) {
	tags := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		k = strings.ToLower(strings.TrimSpace(k))
		if _, dup := tags[k]; !dup {
			tags[k] = strings.TrimSpace(v)
		}
	}
	rec := &dmarcRecord{adkim: 'r', aspf: 'r', pct: 100}
	rec.p = policy(tags["p"])
	sp, hasSP := tags["sp"]
	if hasSP {
		rec.sp = policy(sp)
	}
	if rec.p == "" || (hasSP && rec.sp == "") {
		if !strings.HasPrefix(strings.ToLower(tags["rua"]), "mailto:") {
			return nil, false
		}
		rec.p, rec.sp = PolicyNone, ""
	}
	if strings.EqualFold(tags["adkim"], "s") {
		rec.adkim = 's'
	}
	if strings.EqualFold(tags["aspf"], "s") {
		rec.aspf = 's'
	}
	if v, ok := tags["pct"]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 100 {
			rec.pct = n
		}
	}
	return rec, true
}

func policy(s string) string {
	switch p := strings.ToLower(s); p {
	case PolicyNone, PolicyQuarantine, PolicyReject:
		return p
	}
	return ""
}

// aligned compares an authenticated identifier with the From domain
// (RFC 7489 §3.1.1, §3.1.2): strict needs the same name, relaxed the same
// organizational domain. Both are in A-labels.
func aligned(id, from string, mode byte) bool {
	id, from = strings.ToLower(strings.TrimSuffix(id, ".")), strings.ToLower(from)
	if id == "" {
		return false
	}
	if id == from {
		return true
	}
	return mode == 'r' && message.OrgDomain(id) == message.OrgDomain(from)
}
