package smtpd

import "sync/atomic"

// Stats are the server's connection counters since it started, for
// metrics and the admin view.
type Stats struct {
	// Accepted connections passed the gate and got an SMTP session.
	Accepted uint64
	// Refused in place of the greeting: connection rate, server-wide and
	// per-client connection limits, talking before the greeting.
	RejectedRate, RejectedTotal, RejectedPerIP, RejectedPregreet uint64
	// RejectedDNSBL counts sessions refused at RCPT for their blocklist
	// score.
	RejectedDNSBL uint64
	// Active is the number of connections open now.
	Active int
}

type counters struct {
	accepted, rejectedRate, rejectedTotal, rejectedPerIP, rejectedPregreet, rejectedDNSBL atomic.Uint64
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Accepted:         s.stats.accepted.Load(),
		RejectedRate:     s.stats.rejectedRate.Load(),
		RejectedTotal:    s.stats.rejectedTotal.Load(),
		RejectedPerIP:    s.stats.rejectedPerIP.Load(),
		RejectedPregreet: s.stats.rejectedPregreet.Load(),
		RejectedDNSBL:    s.stats.rejectedDNSBL.Load(),
		Active:           s.limits.Active(),
	}
}
