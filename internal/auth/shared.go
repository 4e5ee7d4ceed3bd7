package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"pimail/internal/store"
)

// Sharing the throttle between the nodes on one database, and across
// restarts (store.LoginEvents).
//
// Each process keeps its own throttle: it alone decides, under its lock,
// whether an attempt may be checked, so that attempts racing each other
// on one node never get more than the allowance. What is shared is the
// counts: every failure, and every success that clears a pair's failures
// or makes an address one of an account's own, goes to the store's log
// within shareInterval, and every shareInterval each process folds the
// events the others recorded since its cursor into its counters, as if
// they had happened here at their time. At start a process reads the
// whole log (failures within the windows, successes within
// KnownSourceTTL: the rest is pruned), so a restart keeps the allowance
// used. An attacker who spreads guesses over several nodes is counted as
// on one, up to the latency: a burst sent to every node within the same
// second may get each node's allowance once, and the counts then hold all
// of it, so that over time no more gets through than from one node.

const (
	// shareInterval is how often a process writes its logins to the log
	// and reads the others'.
	shareInterval = 500 * time.Millisecond
	// pruneInterval is how often a process removes the log's old events.
	pruneInterval = 10 * time.Minute
	// knownRefresh: a success from an address already known is written
	// to the log again only after this long.
	knownRefresh = 24 * time.Hour
	// readBatch bounds the events read in one statement.
	readBatch = 1000
)

// sharing is the state of Share's loop.
type sharing struct {
	st        store.LoginEvents
	cursor    int64 // the last Seq read
	lastPrune time.Time
	lastWarn  time.Time
	stop      chan struct{}
	done      chan struct{}
}

// Share makes the throttle's counts those of every process that shares
// st: it reads the logins recorded so far (so a restart keeps the
// allowance used), then, until Close, writes the logins counted here and
// reads the others' every half second. Call it once, before the
// Authenticator serves; without it, the counts are this process's alone.
func (a *Authenticator) Share(ctx context.Context, st store.LoginEvents) error {
	if err := a.join(ctx, st); err != nil {
		return err
	}
	go a.shareLoop()
	return nil
}

// join is Share but for the loop: it reads the log so far.
func (a *Authenticator) join(ctx context.Context, st store.LoginEvents) error {
	if a.share != nil {
		return errors.New("auth: Share called twice")
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	a.gate.mu.Lock()
	a.gate.node = hex.EncodeToString(id)
	a.gate.mu.Unlock()
	a.share = &sharing{st: st, stop: make(chan struct{}), done: make(chan struct{})}
	err := a.prune(ctx)
	if err == nil {
		err = a.pull(ctx)
	}
	if err != nil {
		a.gate.mu.Lock()
		a.gate.node = ""
		a.gate.mu.Unlock()
		a.share = nil
	}
	return err
}

// Close stops sharing, after writing the logins counted here to the log.
func (a *Authenticator) Close() {
	if a.share == nil {
		return
	}
	select {
	case <-a.share.stop:
	default:
		close(a.share.stop)
	}
	<-a.share.done
}

func (a *Authenticator) shareLoop() {
	sh := a.share
	defer close(sh.done)
	tick := time.NewTicker(shareInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-sh.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := a.push(ctx); err != nil {
				a.log.Warn("auth: writing the last failed logins to the store", "err", err)
			}
			cancel()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := a.exchange(ctx)
		cancel()
		if err != nil && time.Since(sh.lastWarn) > time.Minute {
			sh.lastWarn = time.Now()
			a.log.Warn("auth: sharing failed logins with other nodes", "err", err)
		}
	}
}

// exchange writes this process's new logins, reads the others' and, now
// and then, prunes the log.
func (a *Authenticator) exchange(ctx context.Context) error {
	if err := a.push(ctx); err != nil {
		return err
	}
	if err := a.pull(ctx); err != nil {
		return err
	}
	if a.now().Sub(a.share.lastPrune) > pruneInterval {
		return a.prune(ctx)
	}
	return nil
}

// push writes the logins counted since the last push. When the store
// fails they are kept for the next push, up to MaxEntries.
func (a *Authenticator) push(ctx context.Context) error {
	t := a.gate
	t.mu.Lock()
	evs := t.out
	t.out = nil
	t.mu.Unlock()
	if len(evs) == 0 {
		return nil
	}
	err := a.share.st.RecordLogins(ctx, evs)
	if err != nil {
		t.mu.Lock()
		t.out = append(evs, t.out...)
		if over := len(t.out) - t.lim.MaxEntries; over > 0 {
			t.out = t.out[over:]
		}
		t.mu.Unlock()
		return fmt.Errorf("auth: recording %d logins: %w", len(evs), err)
	}
	return nil
}

// pull folds the events recorded by other processes since the cursor
// into the counters.
func (a *Authenticator) pull(ctx context.Context) error {
	sh := a.share
	for {
		evs, err := sh.st.LoginsAfter(ctx, sh.cursor, readBatch)
		if err != nil {
			return fmt.Errorf("auth: reading logins: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		t := a.gate
		t.mu.Lock()
		now := a.now()
		for _, ev := range evs {
			t.fold(ev, now)
		}
		t.mu.Unlock()
		sh.cursor = evs[len(evs)-1].Seq
		if len(evs) < readBatch {
			return nil
		}
	}
}

// prune removes the events that no longer count.
func (a *Authenticator) prune(ctx context.Context) error {
	now := a.now()
	l := a.gate.lim
	if err := a.share.st.PruneLogins(ctx, now.Add(-max(l.Window, l.AccountWindow)), now.Add(-l.KnownSourceTTL)); err != nil {
		return fmt.Errorf("auth: pruning logins: %w", err)
	}
	a.share.lastPrune = now
	return nil
}

// record queues a login counted here for the log; t.mu is held.
func (t *throttle) record(user, src string, now time.Time, ok bool) {
	if t.node == "" || len(t.out) >= t.lim.MaxEntries {
		return
	}
	t.out = append(t.out, store.LoginEvent{Node: t.node, Account: user, Source: src, Time: now, Success: ok})
}

// fold counts an event that another process recorded as end counted it
// there: a failure adds to the address, the pair and the account what is
// left of it after leaking since its time; a success clears the pair's
// failures and makes the address the account's. t.mu is held.
func (t *throttle) fold(ev store.LoginEvent, now time.Time) {
	if ev.Node == t.node {
		return
	}
	pair := ev.Account + "\x00" + ev.Source
	if ev.Success {
		if now.Sub(ev.Time) > t.lim.KnownSourceTTL {
			return
		}
		if p := t.pairs.m[pair]; p != nil {
			p.level = 0
		}
		t.accounts.get(ev.Account, now).addKnown(ev.Source, ev.Time, t.lim.KnownSourceTTL)
		return
	}
	age := max(0, now.Sub(ev.Time).Seconds())
	for _, c := range []struct {
		tab *table
		key string
	}{{&t.sources, ev.Source}, {&t.pairs, pair}, {&t.accounts, ev.Account}} {
		if left := 1 - age*c.tab.rate; left > 0 {
			c.tab.get(c.key, now).level += left
		}
	}
}
