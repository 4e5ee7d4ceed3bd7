package smtpd

import (
	"context"

	"github.com/emersion/go-smtp"

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
func (s *session) reputation() dnsbl.Verdict {
	if s.verdictKnown || s.pending == nil {
		return s.verdict
	}
	ctx, cancel := context.WithTimeout(s.srv.ctx, maxDNSBLWait)
	defer cancel()
	s.verdict = s.pending.Wait(ctx)
	s.verdictKnown = true
	if s.verdict.Score > 0 || s.verdict.Incomplete {
		s.log.Info("blocklist verdict", "score", s.verdict.Score, "lists", s.verdict.Listed, "incomplete", s.verdict.Incomplete)
	}
	return s.verdict
}

// blocklisted reports whether the client's score reaches the threshold,
// and the reply refusing it.
func (s *session) blocklisted() (bool, *smtp.SMTPError) {
	if s.pending == nil {
		return false, nil
	}
	v := s.reputation()
	if v.Score < s.srv.cfg.DNSBLThreshold {
		return false, nil
	}
	if !s.countedBlocked {
		s.countedBlocked = true
		s.srv.stats.rejectedDNSBL.Add(1)
	}
	return true, replyBlocklisted(s.remoteIP, v.Listed)
}
