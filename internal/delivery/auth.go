package delivery

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"

	"pimail/internal/msgauth"
)

// Auth configures the sender authentication step: SPF, DKIM and DMARC
// (internal/msgauth). The zero Auth skips the step.
type Auth struct {
	// Checker runs the checks and names this server in
	// Authentication-Results.
	Checker *msgauth.Checker
	// TrustLoopback skips the checks for mail from a loopback address
	// (local scripts, a content filter re-injecting mail). Off, mail
	// from loopback is checked like any other, which is what tests that
	// run several servers on one host need.
	TrustLoopback bool
	// NoReject files mail failing a DMARC p=reject policy into Junk
	// instead of refusing it.
	NoReject bool
}

// WithAuth turns sender authentication on for mail from outside: every
// envelope without Authenticated set (and, with TrustLoopback, not from
// loopback). Call it before the pipeline is used.
func (p *Pipeline) WithAuth(a Auth) *Pipeline {
	p.auth = a
	return p
}

func (a Auth) enabled() bool { return a.Checker != nil }

// applies reports whether env's message is checked: mail that an
// authenticated user submitted, or that the server made itself, is not.
func (a Auth) applies(env Envelope) bool {
	if !a.enabled() || env.Authenticated {
		return false
	}
	if a.TrustLoopback {
		if ip, err := netip.ParseAddr(strings.Trim(env.RemoteIP, "[]")); err == nil && ip.Unmap().IsLoopback() {
			return false
		}
	}
	return true
}

// stripForeignAuthResults drops Authentication-Results fields naming this
// server that came with the message (RFC 8601 §5). It runs for every
// message, authenticated submissions too: no one may put this server's
// verdict into a mailbox.
func (a Auth) stripForeignAuthResults(raw []byte) []byte {
	if !a.enabled() {
		return raw
	}
	return msgauth.StripAuthResults(raw, a.Checker.AuthservID())
}

// authenticate runs SPF, DKIM and DMARC on raw (the message as received,
// before the Return-Path field) and applies the From domain's DMARC
// policy (RFC 7489 §6.6.4, §7): reject refuses the message with 550
// 5.7.1, quarantine files it into Junk for every recipient. A temporary
// DNS failure never refuses: the message is delivered with temperror
// results for the spam filter to weigh.
func (p *Pipeline) authenticate(ctx context.Context, log *slog.Logger, env Envelope, raw []byte, out *filterOutcome) (*msgauth.Result, error) {
	res := p.auth.Checker.Check(ctx, msgauth.Input{
		Raw:      raw,
		RemoteIP: env.RemoteIP,
		Helo:     env.Helo,
		MailFrom: env.MailFrom,
	})
	out.headers += res.Header
	out.logArgs = append(out.logArgs, res.LogArgs()...)
	v, _ := res.DMARCVerdict()
	if v.Result != "fail" {
		return res, nil
	}
	switch {
	case v.Disposition == msgauth.PolicyReject && !p.auth.NoReject:
		log.Info("message refused by DMARC policy", "from", env.MailFrom, "ip", env.RemoteIP,
			"header_from", v.FromDomain, "spf", res.SPF.Result, "dkim", res.DKIMSummary())
		// RFC 7489 §6.6.4 / §10.3: refuse during the SMTP transaction
		// (never accept, then bounce); RFC 3463 X.7.1.
		return nil, &RejectError{Code: 550, Enhanced: [3]int{5, 7, 1},
			Message: "Message refused: the sender domain's DMARC policy rejects unauthenticated mail",
			Reason:  "dmarc=fail p=" + v.Policy + " header.from=" + v.FromDomain}
	case v.Disposition == msgauth.PolicyReject, v.Disposition == msgauth.PolicyQuarantine:
		out.junkAll = true
	}
	return res, nil
}
