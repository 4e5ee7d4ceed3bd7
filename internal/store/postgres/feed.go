package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// The change feed across nodes. A transaction's events go to this node's
// subscribers after its commit (runTx) and to the other nodes in one of
// two ways, behind the same Subscribe:
//
//   - FeedNotify: after the commit, the node sends them with NOTIFY on
//     the channel feedChannel, and every node LISTENs on a connection of
//     its own (not from the pool) and publishes what other nodes sent.
//     The NOTIFY is not part of the writing transaction: PostgreSQL
//     serialises the commits of all transactions that notify, with their
//     WAL flush, behind one lock (docs/benchmarks.md has what that
//     cost with the NOTIFY inside). A notifier goroutine sends what the commits of the
//     node left, many events in one statement of a transaction that
//     writes nothing. A node that dies between a commit and its NOTIFY
//     leaves the other nodes' listeners to learn of that change with the
//     next one of the mailbox (or the client's next command). When the
//     listening connection breaks, notifications may be lost meanwhile:
//     once it is back, the node tells its subscribers that each of their
//     mailboxes changed, and they read again with Changes.
//   - FeedPoll, for PostgreSQL-compatible engines without LISTEN/NOTIFY
//     (CockroachDB, YugabyteDB): every PollInterval the node reads the
//     counters of the mailboxes of the accounts it has subscribers for
//     (HIGHESTMODSEQ moves with every change, the name and subscription
//     with the mailbox list) and publishes what moved.

// feedChannel is the NOTIFY channel.
const feedChannel = "pimail_feed"

// notify hands a commit's events to the notifier (FeedNotify); it never
// blocks.
func (s *Store) notify(events []store.Event) {
	if s.notifyWake == nil {
		return
	}
	s.notifyMu.Lock()
	for _, ev := range events {
		s.notifyPending[ev] = struct{}{}
	}
	s.notifyMu.Unlock()
	select {
	case s.notifyWake <- struct{}{}:
	default:
	}
}

// notifier sends the pending events to the other nodes until Close, then
// once more, so that a command's last commit is announced.
func (s *Store) notifier() {
	defer s.wg.Done()
	for done := false; !done; {
		select {
		case <-s.notifyWake:
		case <-s.ctx.Done():
			done = true
		}
		s.notifyMu.Lock()
		evs := s.notifyPending
		s.notifyPending = map[store.Event]struct{}{}
		s.notifyMu.Unlock()
		if len(evs) == 0 {
			continue
		}
		payloads := make([]string, 0, len(evs))
		for ev := range evs {
			payloads = append(payloads, s.node+" "+strconv.FormatInt(ev.AccountID, 10)+" "+strconv.FormatInt(ev.MailboxID, 10))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := s.pool.Exec(ctx, "SELECT pg_notify('"+feedChannel+"', p) FROM unnest($1::text[]) p", payloads); err != nil {
			s.log.Warn("change feed: notify", "err", err)
		}
		cancel()
	}
}

// parsePayload reads a notification; ok is false for this node's own and
// for anything malformed.
func (s *Store) parsePayload(p string) (store.Event, bool) {
	f := strings.Fields(p)
	if len(f) != 3 || f[0] == s.node {
		return store.Event{}, false
	}
	acc, err1 := strconv.ParseInt(f[1], 10, 64)
	mb, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return store.Event{}, false
	}
	return store.Event{AccountID: acc, MailboxID: mb}, true
}

// startFeed starts the goroutine that brings other nodes' events. With
// FeedNotify, Open waits until the node listens, so that nothing
// committed after Open returns is missed.
func (s *Store) startFeed(ctx context.Context) error {
	if s.opts.Feed == FeedNotify {
		// Admin commands too: their changes (a new account's
		// mailboxes, an expunge by the web admin's CLI) reach the
		// servers' sessions.
		s.notifyPending = map[store.Event]struct{}{}
		s.notifyWake = make(chan struct{}, 1)
		s.wg.Add(1)
		go s.notifier()
	}
	if s.opts.Admin {
		return nil
	}
	if s.opts.Feed == FeedPoll {
		s.wg.Add(1)
		go s.poll()
		return nil
	}
	conn, err := s.listen(ctx)
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go s.listener(conn)
	return nil
}

// listen opens the listening connection.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres store: change feed: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+feedChannel); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("postgres store: change feed: listen: %w", err)
	}
	return conn, nil
}

// listener publishes other nodes' notifications until Close, and
// reconnects (with back-off up to 5 s) when the connection breaks.
func (s *Store) listener(conn *pgx.Conn) {
	defer s.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(s.ctx)
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				if s.ctx.Err() != nil {
					return
				}
				s.log.Warn("change feed: listening connection lost; reconnecting", "err", err)
				break
			}
			if ev, ok := s.parsePayload(n.Payload); ok {
				s.feed.Publish(ev)
			}
			backoff = 100 * time.Millisecond
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		c, err := s.listen(ctx)
		cancel()
		if err != nil {
			s.log.Warn("change feed: reconnect failed", "err", err)
			continue
		}
		conn = c
		s.log.Info("change feed: listening again")
		// What was committed while nobody listened: tell every
		// subscriber to read its mailboxes again.
		if err := s.publishAll(); err != nil {
			s.log.Warn("change feed: resync", "err", err)
		}
	}
}

// publishAll publishes an event for every mailbox (and the mailbox list)
// of every account with subscribers.
func (s *Store) publishAll() error {
	accounts := s.feed.Accounts()
	if len(accounts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	rows, _ := s.pool.Query(ctx, "SELECT account_id, id FROM mailboxes WHERE account_id = ANY($1)", accounts)
	var ev store.Event
	_, err := pgx.ForEachRow(rows, []any{&ev.AccountID, &ev.MailboxID}, func() error {
		s.feed.Publish(ev)
		return nil
	})
	for _, a := range accounts {
		s.feed.Publish(store.Event{AccountID: a})
	}
	return err
}

// mailboxState is what the poller compares.
type mailboxState struct {
	account       int64
	name          string
	subscribed    bool
	highestModSeq int64
}

// poll is FeedPoll's loop.
func (s *Store) poll() {
	defer s.wg.Done()
	last := map[int64]mailboxState{} // by mailbox ID
	known := map[int64]bool{}        // accounts whose mailboxes are in last
	tick := time.NewTicker(s.opts.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		accounts := s.feed.Accounts()
		if len(accounts) == 0 {
			clear(last)
			clear(known)
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		rows, _ := s.pool.Query(ctx, `SELECT id, account_id, name,
			EXISTS (SELECT 1 FROM subscriptions s WHERE s.account_id = mailboxes.account_id AND s.name = mailboxes.name),
			highestmodseq FROM mailboxes WHERE account_id = ANY($1)`, accounts)
		now := map[int64]mailboxState{}
		var id int64
		var st mailboxState
		_, err := pgx.ForEachRow(rows, []any{&id, &st.account, &st.name, &st.subscribed, &st.highestModSeq}, func() error {
			now[id] = st
			return nil
		})
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("change feed: poll", "err", err)
			}
			continue
		}
		listChanged := map[int64]bool{}
		for id, st := range now {
			old, ok := last[id]
			switch {
			case !known[st.account]:
				// First look at this account: nothing to compare.
			case !ok || old.name != st.name || old.subscribed != st.subscribed:
				listChanged[st.account] = true
				s.feed.Publish(store.Event{AccountID: st.account, MailboxID: id})
			case old.highestModSeq != st.highestModSeq:
				s.feed.Publish(store.Event{AccountID: st.account, MailboxID: id})
			}
		}
		for id, old := range last {
			if _, ok := now[id]; !ok && known[old.account] {
				listChanged[old.account] = true
				s.feed.Publish(store.Event{AccountID: old.account, MailboxID: id})
			}
		}
		for a := range listChanged {
			s.feed.Publish(store.Event{AccountID: a})
		}
		last = now
		clear(known)
		for _, a := range accounts {
			known[a] = true
		}
	}
}
