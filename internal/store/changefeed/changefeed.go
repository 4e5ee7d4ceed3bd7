// Package changefeed fans change events out to the listeners of one
// process (store.ChangeFeed's Subscribe): every store implementation
// publishes the events of its commits here, and store/postgres also those
// another node committed.
package changefeed

import (
	"sync"

	"pimail/internal/store"
)

// Feed is the in-process change feed: subscribers per account.
type Feed struct {
	mu     sync.Mutex
	subs   map[int64]map[*subscriber]struct{}
	closed bool
}

// subscriber coalesces events: publish adds to a pending set (duplicates
// merge) and wakes the subscriber's goroutine, which hands the pending events
// to the listener's channel. A slow listener therefore never blocks the
// writer, and it loses only duplicates; pending is bounded by the number of
// mailboxes of the account plus one.
type subscriber struct {
	out  chan store.Event
	wake chan struct{} // capacity 1
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	pending []store.Event
	seen    map[store.Event]struct{}
}

// New returns a feed without subscribers.
func New() *Feed {
	return &Feed{subs: make(map[int64]map[*subscriber]struct{})}
}

// Subscribe returns a channel of change events for an account and a function
// that stops the subscription and closes the channel. The channel is also
// closed by Close.
func (f *Feed) Subscribe(accountID int64) (<-chan store.Event, func()) {
	sub := &subscriber{
		out:  make(chan store.Event, 16),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		seen: make(map[store.Event]struct{}),
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		close(sub.out)
		return sub.out, func() {}
	}
	m := f.subs[accountID]
	if m == nil {
		m = make(map[*subscriber]struct{})
		f.subs[accountID] = m
	}
	m[sub] = struct{}{}
	f.mu.Unlock()
	go sub.run()
	cancel := func() {
		f.mu.Lock()
		if m := f.subs[accountID]; m != nil {
			delete(m, sub)
			if len(m) == 0 {
				delete(f.subs, accountID)
			}
		}
		f.mu.Unlock()
		sub.stop()
	}
	return sub.out, cancel
}

func (sub *subscriber) stop() { sub.once.Do(func() { close(sub.done) }) }

// run forwards pending events to the listener until stopped, then closes out.
func (sub *subscriber) run() {
	defer close(sub.out)
	for {
		select {
		case <-sub.done:
			return
		case <-sub.wake:
		}
		sub.mu.Lock()
		evs := sub.pending
		sub.pending = nil
		clear(sub.seen)
		sub.mu.Unlock()
		for _, ev := range evs {
			select {
			case sub.out <- ev:
			case <-sub.done:
				return
			}
		}
	}
}

// Publish hands ev to the account's subscribers; it never blocks.
func (f *Feed) Publish(ev store.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sub := range f.subs[ev.AccountID] {
		sub.mu.Lock()
		if _, dup := sub.seen[ev]; !dup {
			sub.seen[ev] = struct{}{}
			sub.pending = append(sub.pending, ev)
		}
		sub.mu.Unlock()
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// Close ends every subscription (a store's Close); later subscriptions
// get a closed channel.
func (f *Feed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, m := range f.subs {
		for sub := range m {
			sub.stop()
		}
	}
	f.subs = map[int64]map[*subscriber]struct{}{}
}

// Accounts lists the accounts that have subscribers now.
func (f *Feed) Accounts() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int64, 0, len(f.subs))
	for id := range f.subs {
		out = append(out, id)
	}
	return out
}
