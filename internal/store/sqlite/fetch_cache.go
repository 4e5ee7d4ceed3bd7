package sqlite

import (
	"sync"

	"pimail/internal/message"
)

// liteCacheBytes bounds the memory the fetch cache holds, as estimated
// by envelopeBytes: about 15,000 envelopes of real mail, or many more
// header sizes. The process's RSS grows by more than that (Go's garbage
// collector keeps headroom). Measured after the IMAP benchmark on the 21k
// mailbox: RSS 49 MiB without the cache, 96 MiB with this bound, 121 MiB
// with room for all 21k envelopes; so a mailbox larger than about 15k
// messages gets part of its envelopes from here and the rest from the
// stored parse. To be made a configuration key.
const liteCacheBytes = 16 << 20

// liteCache keeps what FetchEnvelopes and FetchHeaders decode from the
// stored parse, keyed by the message's content address (SHA-256). A
// message's content never changes under its address, and the envelope
// and header size are a function of the content alone, so an entry is
// never stale and the cache is shared by every store of the process.
// When full it drops entries at random (Go's map order), which, unlike
// LRU, still gives hits when a mailbox larger than the cache is scanned
// from the first message to the last.
type liteCache struct {
	mu    sync.Mutex
	env   map[string]*message.Envelope
	bs    map[string]int64
	bytes int
}

var fetchCache = &liteCache{env: map[string]*message.Envelope{}, bs: map[string]int64{}}

func (c *liteCache) envelope(sha string) *message.Envelope {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.env[sha]
}

func (c *liteCache) bodyStart(sha string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.bs[sha]
	return n, ok
}

func (c *liteCache) putEnvelope(sha string, e *message.Envelope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.env[sha]; ok {
		return
	}
	c.env[sha] = e
	c.bytes += len(sha) + envelopeBytes(e)
	c.trim()
}

func (c *liteCache) putBodyStart(sha string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.bs[sha]; ok {
		return
	}
	c.bs[sha] = n
	c.bytes += len(sha) + 32
	c.trim()
}

// trim drops entries until the cache is at 90 % of its budget.
func (c *liteCache) trim() {
	if c.bytes <= liteCacheBytes {
		return
	}
	for sha, e := range c.env {
		if c.bytes <= liteCacheBytes*9/10 {
			return
		}
		delete(c.env, sha)
		c.bytes -= len(sha) + envelopeBytes(e)
	}
	for sha := range c.bs {
		if c.bytes <= liteCacheBytes*9/10 {
			return
		}
		delete(c.bs, sha)
		c.bytes -= len(sha) + 32
	}
}

// envelopeBytes estimates the memory an envelope holds in the cache:
// the map entry and key, the struct, the strings and the address lists.
func envelopeBytes(e *message.Envelope) int {
	n := 400 + len(e.Date) + len(e.Subject) + len(e.InReplyTo) + len(e.MessageID)
	for _, l := range [][]message.Address{e.From, e.Sender, e.ReplyTo, e.To, e.Cc, e.Bcc} {
		for _, a := range l {
			n += 88 + len(a.Name) + len(a.Mailbox) + len(a.Host) + len(a.Group)
		}
	}
	return n
}
