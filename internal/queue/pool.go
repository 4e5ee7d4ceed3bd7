package queue

import (
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// maxIdlePerKey bounds the idle connections kept per destination.
const maxIdlePerKey = 2

// conn is one SMTP client connection to a destination.
type conn struct {
	c    *smtp.Client
	key  string // destination: address, TLS mode, credentials
	host string // the MX or smarthost name
	tls  bool
	used time.Time
}

// connPool keeps connections idle for a short time, so that the next
// message to the same destination skips connect, greeting, EHLO, TLS and
// AUTH (RFC 5321 §3.3 allows many transactions per session).
type connPool struct {
	idle    time.Duration
	mu      sync.Mutex
	entries map[string][]*conn
}

func newConnPool(idle time.Duration) *connPool {
	return &connPool{idle: idle, entries: map[string][]*conn{}}
}

// get returns an idle connection to key, checked with RSET, or nil.
func (p *connPool) get(key string) *conn {
	for range maxIdlePerKey + 1 {
		p.mu.Lock()
		cs := p.entries[key]
		if len(cs) == 0 {
			p.mu.Unlock()
			return nil
		}
		c := cs[len(cs)-1]
		p.entries[key] = cs[:len(cs)-1]
		p.mu.Unlock()
		if time.Since(c.used) < p.idle && c.c.Reset() == nil {
			return c
		}
		c.c.Close()
	}
	return nil
}

// put keeps c for reuse, or closes it when the pool for its key is full.
func (p *connPool) put(c *conn) {
	c.used = time.Now()
	p.mu.Lock()
	if len(p.entries[c.key]) < maxIdlePerKey {
		p.entries[c.key] = append(p.entries[c.key], c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	quit(c)
}

// expire closes connections idle for longer than the idle timeout.
func (p *connPool) expire() {
	var old []*conn
	p.mu.Lock()
	for k, cs := range p.entries {
		keep := cs[:0]
		for _, c := range cs {
			if time.Since(c.used) >= p.idle {
				old = append(old, c)
			} else {
				keep = append(keep, c)
			}
		}
		if len(keep) == 0 {
			delete(p.entries, k)
		} else {
			p.entries[k] = keep
		}
	}
	p.mu.Unlock()
	for _, c := range old {
		quit(c)
	}
}

func (p *connPool) closeAll() {
	p.mu.Lock()
	all := p.entries
	p.entries = map[string][]*conn{}
	p.mu.Unlock()
	for _, cs := range all {
		for _, c := range cs {
			quit(c)
		}
	}
}

// quit ends a session politely (RFC 5321 §4.1.1.10), bounded in time.
func quit(c *conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.c.Quit()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.c.Close()
	}
}
