package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"pimail/internal/store"
)

// Quotas (RFC 9208 limits, enforced here rather than in the store so that
// notices, moves and expunges are never refused). Before a message is
// stored, each recipient account's usage plus the message size is checked
// against its limit: an account over the limit does not get the message.
// When no recipient is left the message is refused with 452 4.2.2 (RFC
// 5321 §4.2.2 "insufficient system storage", RFC 3463 X.2.2 "mailbox
// full"; temporary, so the sender retries while the user makes room), or
// 552 5.2.2 with WithQuotaPermanent.
//
// The user is told: when a message is refused for quota, or a delivery
// takes the account to 90 % of its limit or more, a short notice goes into
// the account's INBOX, at most once per store.QuotaNoticeInterval.

// quotaWarnPercent is the usage from which the user gets a notice.
const quotaWarnPercent = 90

// WithQuotaPermanent makes over-quota refusals permanent (552 5.2.2)
// instead of temporary (452 4.2.2). Call it before the pipeline is used.
func (p *Pipeline) WithQuotaPermanent(permanent bool) *Pipeline {
	p.quotaPermanent = permanent
	return p
}

// quotaReject is the refusal of a message no recipient has room for.
func (p *Pipeline) quotaReject(reason string) *RejectError {
	if p.quotaPermanent {
		return &RejectError{Code: 552, Enhanced: [3]int{5, 2, 2}, Message: "mailbox full", Reason: reason}
	}
	return &RejectError{Code: 452, Enhanced: [3]int{4, 2, 2}, Message: "mailbox full", Reason: reason}
}

// overQuota reports whether size more bytes take the account over its limit.
func overQuota(limit, used, size int64) bool {
	return limit > 0 && used+size > limit
}

// nearQuota reports whether usage is at quotaWarnPercent of the limit or more.
func nearQuota(limit, used int64) bool {
	return limit > 0 && used*100 >= limit*quotaWarnPercent
}

// quotaUse is one recipient account's standing before the delivery.
type quotaUse struct {
	accountID   int64
	limit, used int64
}

// checkQuotas splits the recipients into those with room for size bytes
// and the accounts without. A store failure is returned: the message is
// then deferred, as for any store failure.
func (p *Pipeline) checkQuotas(ctx context.Context, rcpts []store.Recipient, size int64) (kept []store.Recipient, keptUse []quotaUse, refused []quotaUse, err error) {
	for _, r := range rcpts {
		u := quotaUse{accountID: r.AccountID}
		if p.dir.Limited(r.AccountID) {
			limit, used, err := p.st.Quota(ctx, r.AccountID)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("quota of account %d: %w", r.AccountID, err)
			}
			u.limit, u.used = limit, used
		}
		if overQuota(u.limit, u.used, size) {
			refused = append(refused, u)
			continue
		}
		kept = append(kept, r)
		keptUse = append(keptUse, u)
	}
	return kept, keptUse, refused, nil
}

// CheckQuota answers whether a recipient address has room for a message
// of size bytes (0 when unknown), for the RCPT command: a *RejectError
// when every local account it resolves to is over its limit and it has no
// remote target, nil otherwise (also when the address does not resolve:
// that is the directory's answer to give). Refusing at RCPT keeps the
// other recipients of the transaction unaffected (RFC 5321 §3.3).
func (p *Pipeline) CheckQuota(ctx context.Context, address string, size int64) error {
	r, err := p.dir.Resolve(address)
	if err != nil || len(r.Accounts) == 0 || len(r.Remote) > 0 {
		return nil
	}
	for _, id := range r.Accounts {
		if !p.dir.Limited(id) {
			return nil // room without limit
		}
		limit, used, err := p.st.Quota(ctx, id)
		if err != nil {
			return fmt.Errorf("quota of account %d: %w", id, err)
		}
		if !overQuota(limit, used, size) {
			return nil
		}
	}
	return p.quotaReject("recipient over quota: " + address)
}

// quotaRefused logs the refused accounts, records them in the delivery
// log when others get the message (partial), and tells their users.
func (p *Pipeline) quotaRefused(ctx context.Context, log *slog.Logger, env Envelope, size int64, refused []quotaUse, partial bool) {
	reply := p.quotaReject("")
	for _, u := range refused {
		addr := p.accountAddress(ctx, u.accountID)
		log.Info("recipient over quota; refused", "account", addr, "limit", u.limit, "used", u.used, "size", size)
		if partial {
			p.dlog.Log(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultRejected,
				From: env.MailFrom, To: addr, RemoteIP: env.RemoteIP,
				Reason: fmt.Sprintf("%d %d.%d.%d %s", reply.Code, reply.Enhanced[0], reply.Enhanced[1], reply.Enhanced[2], reply.Message)})
		}
		sender := env.MailFrom
		if sender == "" {
			sender = "the null sender (a delivery report)"
		}
		p.quotaNotice(ctx, log, u.accountID, addr, u.limit, u.used, true,
			fmt.Sprintf("A message of %s from %s could not be delivered to you because your\r\nmailbox is full.",
				formatSize(size), sender))
	}
}

// quotaWarn tells the users whose usage the delivery took to
// quotaWarnPercent of their limit.
func (p *Pipeline) quotaWarn(ctx context.Context, log *slog.Logger, size int64, uses []quotaUse) {
	for _, u := range uses {
		if !nearQuota(u.limit, u.used+size) {
			continue
		}
		p.quotaNotice(ctx, log, u.accountID, p.accountAddress(ctx, u.accountID), u.limit, u.used+size, false,
			"Your mailbox is almost full; new mail will be refused once it is.")
	}
}

// quotaNotice delivers a short notice into the account's INBOX unless one
// was sent within store.QuotaNoticeInterval. It goes straight to the
// store, past the quota check. Failures are logged only: the notice must
// never fail the delivery it is about.
func (p *Pipeline) quotaNotice(ctx context.Context, log *slog.Logger, accountID int64, addr string, limit, used int64, full bool, what string) {
	now := p.now()
	ok, err := p.st.ClaimQuotaNotice(ctx, accountID, now)
	if err != nil {
		log.Warn("quota notice: claim failed", "account", addr, "err", err)
		return
	}
	if !ok {
		return
	}
	raw := quotaNoticeMessage(addr, now, limit, used, full, what)
	if _, err := p.st.Deliver(ctx, store.Delivery{Raw: raw, InternalDate: now,
		Recipients: []store.Recipient{{AccountID: accountID}}}); err != nil {
		log.Warn("quota notice: delivery failed", "account", addr, "err", err)
		return
	}
	log.Info("quota notice delivered", "account", addr, "limit", limit, "used", used)
}

// quotaNoticeMessage builds the notice (RFC 5322), marked as
// auto-generated (RFC 3834 §5) so that no one replies to it automatically.
// full says a message was refused; otherwise usage is near the limit.
func quotaNoticeMessage(addr string, now time.Time, limit, used int64, full bool, what string) []byte {
	domain := "localhost"
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		domain = addr[i+1:]
	}
	pct := used * 100 / limit
	var b strings.Builder
	fmt.Fprintf(&b, "From: Mail System <postmaster@%s>\r\n", domain)
	fmt.Fprintf(&b, "To: <%s>\r\n", addr)
	if full {
		b.WriteString("Subject: Your mailbox is full\r\n")
	} else {
		b.WriteString("Subject: Your mailbox is almost full\r\n")
	}
	fmt.Fprintf(&b, "Date: %s\r\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <quota.%s@%s>\r\n", NewID(), domain)
	b.WriteString("Auto-Submitted: auto-generated\r\n")
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	b.WriteString(what + "\r\n\r\n")
	fmt.Fprintf(&b, "You are using %s of your %s (%d %%).\r\n", formatSize(used), formatSize(limit), pct)
	b.WriteString("Delete messages you no longer need, and empty the Trash, to make room.\r\n")
	return []byte(b.String())
}

// accountAddress names an account for logs and notices.
func (p *Pipeline) accountAddress(ctx context.Context, id int64) string {
	a, err := p.st.AccountByID(ctx, id)
	if err != nil {
		return fmt.Sprintf("account %d", id)
	}
	return a.Address
}

// formatSize writes a byte count for people: "512 KB", "1.5 MB".
func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
