package smtpserver

import (
	"context"

	"pimail/internal/dnsbl"
	"pimail/internal/spam"
)

// dnsblHits are the listings of a verdict as the spam filter counts them
// (delivery.Envelope.DNSBL).
func dnsblHits(v dnsbl.Verdict) []spam.DNSBLHit {
	var hits []spam.DNSBLHit
	for _, h := range v.Hits {
		hits = append(hits, spam.DNSBLHit{List: h.Zone, Weight: h.Weight})
	}
	return hits
}

// reputation returns the client's blocklist verdict, waiting (bounded)
// for the lookup started at connect. It is asked once per session; the
// verdict is kept for the later transactions.
func (r mxRole) reputation(s *session) dnsbl.Verdict {
	if s.verdictKnown || s.pending == nil {
		return s.verdict
	}
	ctx, cancel := context.WithTimeout(r.srv.ctx, maxDNSBLWait)
	defer cancel()
	s.verdict = s.pending.Wait(ctx)
	s.verdictKnown = true
	if s.verdict.Score > 0 || s.verdict.Incomplete {
		r.srv.log.Info("blocklist verdict", "ip", s.ip, "score", s.verdict.Score, "lists", s.verdict.Listed, "incomplete", s.verdict.Incomplete)
	}
	return s.verdict
}

// blocklisted reports whether the client's score reaches the threshold,
// and the reply refusing it.
func (r mxRole) blocklisted(s *session) (bool, *reply) {
	if s.pending == nil {
		return false, nil
	}
	v := r.reputation(s)
	if v.Score < r.srv.cfg.DNSBLThreshold {
		return false, nil
	}
	if !s.countedBlocked {
		s.countedBlocked = true
		r.srv.log.Info("recipient refused: client blocklisted", "ip", s.ip)
	}
	return true, replyBlocklisted(s.ip.String(), v.Listed)
}
