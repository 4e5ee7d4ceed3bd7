package queue

import (
	"context"
	"sync"
)

// keyLimiter bounds concurrent holders per key (a recipient domain).
type keyLimiter struct {
	max     int
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{} // closed and replaced on every release
}

func newKeyLimiter(max int) *keyLimiter {
	return &keyLimiter{max: max, n: map[string]int{}, changed: make(chan struct{})}
}

// acquire waits until key has a free slot or ctx ends.
func (l *keyLimiter) acquire(ctx context.Context, key string) error {
	for {
		l.mu.Lock()
		if l.n[key] < l.max {
			l.n[key]++
			l.mu.Unlock()
			return nil
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *keyLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[key]--
	if l.n[key] <= 0 {
		delete(l.n, key)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}
