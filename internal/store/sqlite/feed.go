package sqlite

import (
	"sync"

	"pimail/internal/store"
)

// feed is the in-process change feed: subscribers per account.
type feed struct {
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

func newFeed() *feed {
	return &feed{subs: make(map[int64]map[*subscriber]struct{})}
}

// Subscribe returns a channel of change events for an account and a function
// that stops the subscription and closes the channel. The channel is also
// closed when the store is closed.
func (s *Store) Subscribe(accountID int64) (<-chan store.Event, func()) {
	return s.feed.subscribe(accountID)
}

func (f *feed) subscribe(accountID int64) (<-chan store.Event, func()) {
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

// publish never blocks.
func (f *feed) publish(ev store.Event) {
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

// closeAll ends every subscription (Store.Close).
func (f *feed) closeAll() {
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
