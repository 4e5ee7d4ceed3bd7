package queue

import (
	"context"
	"fmt"

	"pimail/internal/message"
	"pimail/internal/store"
)

// Enqueue DKIM-signs raw with the keys of its From: domain (when that
// domain is local and a signer is configured) and queues it for the
// recipients. accountID is the submitting account (0 for bounces and
// forwarding); from "" is the null reverse-path. It returns the entry ID
// once the message is on disk, and wakes the worker loop.
func (q *Queue) Enqueue(ctx context.Context, accountID int64, from string, rcpts []string, raw []byte) (int64, error) {
	if len(rcpts) == 0 {
		return 0, fmt.Errorf("queue: enqueue without recipients: %w", store.ErrInvalid)
	}
	signed, err := q.sign(ctx, raw)
	if err != nil {
		return 0, err
	}
	e := store.QueueEntry{MailFrom: from, AccountID: accountID}
	for _, r := range rcpts {
		e.Recipients = append(e.Recipients, store.QueueRecipient{Address: r})
	}
	e, err = q.st.Enqueue(ctx, e, signed)
	if err != nil {
		return 0, fmt.Errorf("queue: enqueue: %w", err)
	}
	q.log.Info("queued", "queue_id", e.ID, "from", from, "rcpts", len(rcpts), "size", e.Size)
	q.Wake()
	return e.ID, nil
}

// sign prepends DKIM signatures of the From: domain, if it is local.
func (q *Queue) sign(ctx context.Context, raw []byte) ([]byte, error) {
	if q.dkim == nil {
		return raw, nil
	}
	dom := headerFromDomain(raw)
	if dom == "" || !q.dir.IsLocalDomain(dom) {
		return raw, nil
	}
	signed, err := q.dkim.SignMessage(ctx, dom, raw)
	if err != nil {
		// An unsigned message is better than none; the failure is logged.
		q.log.Error("DKIM signing failed; sending unsigned", "domain", dom, "err", err)
		return raw, nil
	}
	return signed, nil
}

// headerFromDomain returns the domain of the first From: address, or "",
// read with the message toolkit (as the receiver's DMARC check reads it).
func headerFromDomain(raw []byte) string {
	addrs, _ := message.Authors(raw)
	if len(addrs) == 0 {
		return ""
	}
	return message.DomainOf(addrs[0].Addr())
}

// Forward queues a message forwarded by an alias to remote targets
// (delivery.Forwarder): from is the envelope sender, already rewritten by
// the caller (SRS). The message is signed only when its From: domain is
// local, as any other.
func (q *Queue) Forward(ctx context.Context, from string, rcpts []string, raw []byte) error {
	_, err := q.Enqueue(ctx, 0, from, rcpts, raw)
	return err
}
