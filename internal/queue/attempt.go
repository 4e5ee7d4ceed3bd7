package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"pimail/internal/deliverylog"
	"pimail/internal/message"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

// process makes one delivery attempt for every pending recipient of e and
// records the outcome.
//
// The slot of each domain (queue.per_domain) is held until the outcome is
// saved, not only while the message is sent: a message the remote has
// accepted but the store has not yet recorded is in flight, and a crash
// sends it again after the restart. Holding the slot bounds those to
// per_domain per domain (docs/reliability.md); released earlier, every
// worker waiting on a slow commit could hold one.
func (q *Queue) process(ctx context.Context, e store.QueueEntry) {
	log := q.log.With("queue_id", e.ID)
	raw, err := q.st.ReadBlob(ctx, e.BlobID)
	if err != nil {
		log.Error("reading queued message", "err", err)
		if ctx.Err() == nil {
			e.NextAttempt = q.now().Add(q.backoff(e.Attempts + 1))
			q.save(log, e)
		}
		return
	}

	// Pending recipients by domain, each domain once per attempt.
	byDomain := map[string][]int{}
	var order []string
	for i, r := range e.Recipients {
		if r.State != store.QueuePending {
			continue
		}
		d := message.DomainOf(r.Address)
		if a, ok := message.ASCIIDomain(d); ok {
			d = a // an internationalized domain goes to the DNS in A-labels
		}
		if _, ok := byDomain[d]; !ok {
			order = append(order, d)
		}
		byDomain[d] = append(byDomain[d], i)
	}
	// Slots are taken in one order (by name), so that two attempts that
	// hold one and wait for another can never wait for each other.
	slices.Sort(order)
	results := map[int]rcptResult{}
	for _, d := range order {
		res := []rcptResult{}
		if err := q.domains.acquire(ctx, d); err != nil {
			for range byDomain[d] {
				res = append(res, rcptResult{reply: "interrupted", status: "4.3.0"})
			}
		} else {
			defer q.domains.release(d) // after the save below
			res = q.deliverDomain(ctx, log, e, raw, d, byDomain[d])
		}
		for i, r := range res {
			results[byDomain[d][i]] = r
		}
	}

	now := q.now()
	if ctx.Err() != nil {
		// Shutting down: keep what was delivered, retry the rest at
		// the next start rather than counting an interrupted attempt.
		for i, r := range results {
			if r.done {
				e.Recipients[i].State = store.QueueDelivered
				e.Recipients[i].LastError = r.reply
				e.Recipients[i].LastAttempt = now
			}
		}
		e.NextAttempt = now
		q.save(log, e)
		return
	}

	e.Attempts++
	var failed []int
	mid, subj := deliverylog.Identify(raw)
	for i, r := range results {
		rc := &e.Recipients[i]
		rc.Attempts++
		rc.LastAttempt = now
		rc.LastError = r.reply
		result := store.ResultDeferred
		switch {
		case r.done:
			rc.State = store.QueueDelivered
			result = store.ResultDelivered
			countAttempt(metrics.ResultDelivered)
			log.Info("delivered", "rcpt", rc.Address, "remote", r.remote, "reply", r.reply)
		case r.perm:
			rc.State = store.QueueFailed
			result = store.ResultBounced
			countAttempt(metrics.ResultFailed)
			failed = append(failed, i)
			log.Warn("delivery failed permanently", "rcpt", rc.Address, "remote", r.remote, "reply", r.reply)
		case now.Sub(e.Created) >= q.cfg.MaxAge:
			rc.State = store.QueueFailed
			result = store.ResultBounced
			rc.LastError = fmt.Sprintf("%s (retried for %s; giving up)", r.reply, q.cfg.MaxAge)
			countAttempt(metrics.ResultFailed)
			failed = append(failed, i)
			log.Warn("delivery failed: too old", "rcpt", rc.Address, "reply", r.reply)
		default:
			countAttempt(metrics.ResultDeferred)
			log.Info("delivery deferred", "rcpt", rc.Address, "remote", r.remote, "reply", r.reply)
		}
		q.dlog.Log(store.DeliveryLogEntry{Direction: store.DirectionOut, Result: result, QueueID: e.ID,
			MessageID: mid, Subject: subj, From: e.MailFrom, To: rc.Address, RemoteIP: r.remote, Reason: rc.LastError})
	}
	statuses := map[int]string{}
	for i, r := range results {
		statuses[i] = r.status
	}
	if len(failed) > 0 {
		q.notify(ctx, log, e, raw, failed, statuses, actionFailed)
	}
	var pending []int
	for i, r := range e.Recipients {
		if r.State == store.QueuePending {
			pending = append(pending, i)
		}
	}
	if len(pending) > 0 {
		e.NextAttempt = now.Add(q.backoff(e.Attempts))
		if !e.DelayNotified && q.cfg.DelayNotice > 0 && now.Sub(e.Created) >= q.cfg.DelayNotice {
			q.notify(ctx, log, e, raw, pending, statuses, actionDelayed)
			e.DelayNotified = true
		}
	}
	q.save(log, e)
}

// save writes the entry back, even while shutting down.
func (q *Queue) save(log *slog.Logger, e store.QueueEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.st.UpdateQueueEntry(ctx, e); err != nil {
		// The lease runs out and the entry is tried again.
		log.Error("recording delivery attempt", "err", err)
	}
}

// deliverDomain delivers e to the recipients at indices idx, all in one
// domain, trying the domain's servers in order until one answers for them.
// The caller holds the domain's slot.
func (q *Queue) deliverDomain(ctx context.Context, log *slog.Logger, e store.QueueEntry, raw []byte, domain string, idx []int) []rcptResult {
	all := func(r rcptResult) []rcptResult {
		out := make([]rcptResult, len(idx))
		for i := range out {
			out[i] = r
		}
		return out
	}

	var re *routeError
	r, err := q.route(ctx, domain)
	if errors.As(err, &re) {
		return all(re.result())
	}
	targets, err := q.targets(ctx, r)
	if errors.As(err, &re) {
		return all(re.result())
	}
	rcpts := make([]string, len(idx))
	for i, j := range idx {
		rcpts[i] = e.Recipients[j].Address
	}
	lastErr := errors.New("no server tried")
	// RFC 5321 §5.1: try the next address or MX when a server cannot be
	// reached or fails the session; stop at the first that answers.
	for _, t := range targets {
		if ctx.Err() != nil {
			break
		}
		c, err := q.connect(ctx, t)
		if err != nil {
			log.Info("server unavailable", "domain", domain, "host", t.host, "addr", t.addr, "err", err)
			lastErr = err
			continue
		}
		res, connErr := q.transaction(c, e.MailFrom, rcpts, raw)
		if connErr != nil {
			c.c.Close()
			log.Info("session with server failed", "host", t.host, "err", connErr)
			lastErr = connErr
			if anyDone(res) {
				return res // some were delivered: do not send them twice
			}
			continue
		}
		q.pool.put(c)
		return res
	}
	return all(rcptResult{reply: lastErr.Error(), status: "4.4.1"})
}

func anyDone(rs []rcptResult) bool {
	for _, r := range rs {
		if r.done {
			return true
		}
	}
	return false
}
