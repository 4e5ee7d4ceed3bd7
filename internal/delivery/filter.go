package delivery

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"pimail/internal/av"
	"pimail/internal/message"
	"pimail/internal/msgauth"
	"pimail/internal/sieve"
	"pimail/internal/spam"
	"pimail/internal/store"
)

// Filters are the content checks of the pipeline. A nil field skips its
// step; the zero Filters deliver everything as before.
type Filters struct {
	// AV runs the attachment policy and, when configured, clamd.
	AV *av.Scanner
	// Spam scores the message for each recipient account.
	Spam *spam.Filter
}

// WithFilters turns the content checks on. Call it before the pipeline
// is used.
func (p *Pipeline) WithFilters(f Filters) *Pipeline {
	p.filters = f
	return p
}

func (f Filters) enabled() bool { return f.AV != nil || f.Spam != nil }

// RejectError is a refusal by a filter, with the SMTP reply it calls for
// (RFC 5321 §4.2, enhanced code RFC 3463). Message is safe to send to the
// client; Reason is for the log.
type RejectError struct {
	Code     int    // 550, 554 or 451
	Enhanced [3]int // e.g. {5, 7, 1}
	Message  string
	Reason   string
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("delivery refused: %d %d.%d.%d %s (%s)", e.Code, e.Enhanced[0], e.Enhanced[1], e.Enhanced[2], e.Message, e.Reason)
}

// Temporary reports a 4xx refusal: the sender should retry.
func (e *RejectError) Temporary() bool { return e.Code/100 == 4 }

// filterOutcome is what the authentication step and the filters decided
// for a deliverable message.
type filterOutcome struct {
	headers string // fields to add on top (after Return-Path)
	junk    map[int64]bool
	junkAll bool // DMARC quarantine: Junk for every recipient
	logArgs []any
	// spam is each recipient account's spam score on spamtest's scales
	// (sieve.go), when the spam filter ran.
	spam map[int64]sieve.Spam
}

// runFilters runs the virus step, then spam scoring, recording into out.
// The order is the cost order and the certainty order: a refused
// attachment needs no score. auth, when not nil, feeds the sender
// authentication results to the spam rules. It returns a *RejectError
// when the message must be refused.
func (p *Pipeline) runFilters(ctx context.Context, log *slog.Logger, env Envelope, accounts []int64, full []byte, parsed *message.Parsed, auth *msgauth.Result, out *filterOutcome) error {
	if p.filters.AV != nil {
		r := p.filters.AV.Scan(ctx, full, parsed)
		out.logArgs = append(out.logArgs, "av", r.Action.String())
		switch r.Action {
		case av.Reject:
			msg := "Message refused: attachment type not accepted (" + r.Reason + ")"
			if r.Reason == "virus" {
				msg = "Message refused: malware found"
			}
			// RFC 3463 X.7.1: delivery not authorized, message refused.
			return &RejectError{Code: 554, Enhanced: [3]int{5, 7, 1}, Message: msg, Reason: r.Reason + " " + r.Detail}
		case av.Defer:
			return &RejectError{Code: 451, Enhanced: [3]int{4, 7, 1}, Message: "Message cannot be checked now, try again later", Reason: r.Reason}
		case av.Tag:
			out.headers += "X-Virus-Status: Unscanned (" + r.Reason + ")\r\n"
		case av.Clean:
			if r.Scanned {
				out.headers += "X-Virus-Status: Clean\r\n"
			}
		}
	}
	if p.filters.Spam != nil {
		in := spam.Input{
			Raw:      full,
			Parsed:   parsed,
			Accounts: accounts,
			MailFrom: env.MailFrom,
			RemoteIP: env.RemoteIP,
			Helo:     env.Helo,
			DNSBL:    env.DNSBL,
			Now:      p.now(),
		}
		if auth != nil {
			v, _ := auth.DMARCVerdict()
			in.SPF, in.DKIM, in.DMARC, in.DMARCPolicy = auth.SPF.Result, auth.DKIMSummary(), v.Result, v.Policy
			for _, d := range auth.DKIM {
				if d.Result == "pass" {
					in.DKIMPass = append(in.DKIMPass, d.Domain)
				}
			}
		}
		res, err := p.filters.Spam.Check(ctx, in)
		if err != nil {
			return fmt.Errorf("spam check: %w", err)
		}
		v := res.Message
		out.logArgs = append(out.logArgs, "spam_score", v.Score, "spam_action", v.Action.String(), "spam_reasons", hitNames(v.Hits), "spam_ms", res.Elapsed.Milliseconds())
		if res.Rejected {
			log.Info("message refused as spam", "from", env.MailFrom, "ip", env.RemoteIP, "score", v.Score, "reasons", hitNames(v.Hits))
			return &RejectError{Code: 550, Enhanced: [3]int{5, 7, 1}, Message: "Message refused as spam", Reason: fmt.Sprintf("spam score %.2f", v.Score)}
		}
		if out.junk == nil {
			out.junk = map[int64]bool{}
		}
		cfg := p.filters.Spam.Config()
		out.spam = make(map[int64]sieve.Spam, len(res.Accounts))
		for id, av := range res.Accounts {
			if av.Action != spam.Accept { // Reject for some recipients only: file it
				out.junk[id] = true
			}
			out.spam[id] = spamtestScore(av.Score, cfg.JunkThreshold, cfg.RejectThreshold)
		}
		out.headers += spam.FormatHeaders(v, p.filters.Spam.Config().JunkThreshold)
	}
	return nil
}

func hitNames(h []spam.Hit) string {
	var b bytes.Buffer
	for i, x := range h {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%.2f", x.Name, x.Score)
	}
	return b.String()
}

// recipients builds the store recipients: junk verdicts go to the
// account's Junk mailbox with the $Junk keyword (RFC 5788 registry).
func (o *filterOutcome) recipients(accounts []int64) []store.Recipient {
	rcpts := make([]store.Recipient, len(accounts))
	for i, id := range accounts {
		rcpts[i] = store.Recipient{AccountID: id}
		if o != nil && (o.junkAll || o.junk[id]) {
			rcpts[i].Mailbox = "Junk"
			rcpts[i].Keywords = []string{"$Junk"}
		}
	}
	return rcpts
}

// stripFilterFields removes X-Spam-* and X-Virus-* fields that came with
// the message: only this server's verdicts may appear in the mailbox.
func stripFilterFields(raw []byte) []byte {
	return spam.StripFields(raw, "X-Spam-", "X-Virus-")
}

// filterRoom is the room prependReturnPath leaves for the fields of the
// filters and of sender authentication (a few hundred bytes; more only
// costs insertHeaders a copy).
const filterRoom = 1 << 10

// insertHeaders puts fields right after the Return-Path line of full (the
// first line) and moves the parsed offsets along, so the message need not
// be parsed again. It moves the rest of the message in place when full
// has the room (prependReturnPath leaves filterRoom), so nothing else may
// hold on to full's bytes.
func insertHeaders(full []byte, parsed *message.Parsed, fields string) []byte {
	if fields == "" {
		return full
	}
	at := bytes.IndexByte(full, '\n') + 1
	n := len(full)
	full = append(full, fields...)
	copy(full[at+len(fields):], full[at:n])
	copy(full[at:], fields)
	d := int64(len(fields))
	top := parsed.Body
	top.Walk(func(p *message.Part) bool {
		if p != top {
			p.HeaderStart += d
		}
		p.BodyStart += d
		p.End += d
		return true
	})
	return full
}
