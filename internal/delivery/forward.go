package delivery

import (
	"context"
	"fmt"
	"log/slog"

	"pimail/internal/arc"
	"pimail/internal/directory"
	"pimail/internal/message"
	"pimail/internal/msgauth"
	"pimail/internal/store"
)

// Forwarder queues a message for remote recipients; the outbound queue
// (internal/queue) is one. It returns once the message is on disk.
type Forwarder interface {
	Forward(ctx context.Context, from string, rcpts []string, raw []byte) error
}

// Sealer adds an ARC set (RFC 8617) to a message forwarded for a local
// domain, carrying this server's authentication results to the next
// receiver; arc.Sealer is one.
type Sealer interface {
	Seal(ctx context.Context, domain string, raw []byte, authResults string, chain arc.Result) ([]byte, error)
}

// WithARC seals forwarded mail that was authenticated here (see Sealer).
// Call it before the pipeline is used.
func (p *Pipeline) WithARC(s Sealer) *Pipeline {
	p.sealer = s
	return p
}

// WithForwarding turns on alias forwarding to remote targets: such
// messages go to f with the envelope sender rewritten by srs (nil: kept
// as it is, which fails SPF at most destinations), and bounces to srs's
// addresses go back to the original sender. Call it before the pipeline
// is used.
func (p *Pipeline) WithForwarding(f Forwarder, srs *SRS) *Pipeline {
	p.fwd = f
	p.srs = srs
	return p
}

// Forwards reports whether remote alias targets are forwarded (otherwise
// an alias with only remote targets gets a temporary refusal).
func (p *Pipeline) Forwards() bool { return p.fwd != nil }

// Resolve is directory.View.Resolve that also knows the SRS addresses of
// this server: a valid, unexpired SRS0 address at a local domain resolves
// to its original sender as a remote target, so bounces of forwarded
// mail find their way back. An SRS address that fails its check is
// resolved like any other address (usually 550 5.1.1).
func (p *Pipeline) Resolve(address string) (directory.Resolution, error) {
	if p.srs != nil && p.fwd != nil && IsSRS(address) && p.dir.IsLocalDomain(message.DomainOf(address)) {
		orig, err := p.srs.Reverse(address)
		if err == nil {
			return directory.Resolution{Remote: []string{orig}}, nil
		}
		p.logger.Info("SRS address refused", "rcpt", address, "err", err)
	}
	return p.dir.Resolve(address)
}

// MaxHops is the most Received fields a message to be forwarded may
// carry: more mean a mail loop (RFC 5321 §6.3: counting Received fields
// detects loops; Postfix's hopcount_limit is 50 too).
const MaxHops = 50

// errLoop refuses a message that has gone round too many times; 554 5.4.6
// is "routing loop detected" (RFC 3463).
var errLoop = &RejectError{Code: 554, Enhanced: [3]int{5, 4, 6}, Message: "Too many hops: mail loop detected", Reason: "loop"}

// errHeaderFields refuses a message with more header fields than
// message.MaxHeaderFields (RFC 3463 X.6.0, other media error).
var errHeaderFields = &RejectError{Code: 554, Enhanced: [3]int{5, 6, 0},
	Message: fmt.Sprintf("Message header has more than %d fields", message.MaxHeaderFields), Reason: "header fields"}

// countReceived counts the Received fields in the header of raw.
func countReceived(raw []byte) int {
	n := 0
	message.ScanFields(raw, func(f message.RawField) bool {
		if f.Is("Received") {
			n++
		}
		return true
	})
	return n
}

// forward queues raw, the message as received, for the remote targets of
// tgt. The envelope sender is rewritten with SRS unless it is null (a
// bounce stays a bounce) or already at a local domain (this server's SPF
// covers it). A message authenticated here (auth not nil) is ARC-sealed
// by the alias's domain first, so the next receiver sees the SPF, DKIM
// and DMARC results from before the envelope changed.
func (p *Pipeline) forward(ctx context.Context, log *slog.Logger, env Envelope, tgt target, raw []byte, auth *msgauth.Result) error {
	from := env.MailFrom
	if p.srs != nil && from != "" && !p.dir.IsLocalDomain(message.DomainOf(from)) {
		from = p.srs.Forward(from, tgt.fwdDomain)
	}
	if tgt.fwdDomain != "" {
		raw = p.seal(ctx, log, tgt.fwdDomain, raw, auth)
	}
	if err := p.fwd.Forward(ctx, from, tgt.remote, raw); err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	log.Info("forwarded", "from", env.MailFrom, "envelope_from", from, "remote", tgt.remote, "size", len(raw))
	p.dlog.LogEach(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultAccepted,
		From: env.MailFrom, RemoteIP: env.RemoteIP, Reason: "250 " + env.ID + " forwarded"}, env.Recipients)
	return nil
}

// seal returns raw with an ARC set (RFC 8617) of domain on top, carrying
// this server's authentication results auth, for mail sent on to another
// receiver (alias forwarding, Sieve redirect). It returns raw as it is
// when the message was not authenticated here (auth nil: it came from
// inside), when no sealer is set, or when sealing fails (the domain has
// no RSA key, say), which it logs: the mail goes on unsealed.
func (p *Pipeline) seal(ctx context.Context, log *slog.Logger, domain string, raw []byte, auth *msgauth.Result) []byte {
	if p.sealer == nil || auth == nil {
		return raw
	}
	sealed, err := p.sealer.Seal(ctx, domain, raw, auth.Header, auth.ARC)
	if err != nil {
		log.Warn("ARC sealing failed; sending on unsealed", "domain", domain, "err", err)
		return raw
	}
	return sealed
}
