package webmail

import (
	"container/list"
	"html/template"
	"sync"
	"time"

	"pimail/internal/store"
)

// lru is a least-recently-used cache bounded by the sum of its entries'
// costs.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	size  int
	ll    *list.List
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	cost int
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, ll: list.New(), items: map[K]*list.Element{}}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put stores v at cost (entries costing over a quarter of the cache are
// not kept).
func (c *lru[K, V]) put(k K, v V, cost int) {
	if cost > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		ent := e.Value.(*lruEntry[K, V])
		c.size += cost - ent.cost
		ent.val, ent.cost = v, cost
		c.ll.MoveToFront(e)
	} else {
		c.items[k] = c.ll.PushFront(&lruEntry[K, V]{key: k, val: v, cost: cost})
		c.size += cost
	}
	for c.size > c.max && c.ll.Len() > 0 {
		e := c.ll.Back()
		ent := e.Value.(*lruEntry[K, V])
		c.ll.Remove(e)
		delete(c.items, ent.key)
		c.size -= ent.cost
	}
}

// The read path's caches. A message's index entry (flags, blob, parsed
// MIME structure) is reused only while its mailbox's UIDVALIDITY and
// HIGHESTMODSEQ are what they were when it was read: every flag change,
// delivery and expunge in the mailbox moves HIGHESTMODSEQ (RFC 7162 §3.1;
// storetest checks it), and the page has just read the mailbox list, so a
// page never shows stale flags or an expunged message. What the read page
// shows of a message's content (authentication results, attachments, the
// rendered plain text) depends only on the blob, which never changes.

// msgKey names a message of a mailbox.
type msgKey struct {
	box int64
	uid uint32
}

type metaEntry struct {
	validity uint32
	modseq   uint64
	meta     store.MessageMeta
}

// bodyView is the blob-derived part of the read page.
type bodyView struct {
	auth        []authResult
	layout      layout // the blocks shown and the parts listed
	textDone    bool
	text        template.HTML // every block as text, rendered (textDone)
	remoteDone  bool
	remoteFound bool // an HTML block refers to remote content (remoteDone)
}

// showHTML says whether the page shows the body formatted (in its
// frame) rather than as plain text: when it has HTML, and the reader
// prefers it or there is no plain form.
func (b *bodyView) showHTML(preferHTML bool) bool {
	return b.layout.hasHTML() && (!b.layout.hasPlain() || preferHTML)
}

// ready says whether b holds what a page showing it needs.
func (b *bodyView) ready(preferHTML bool) bool {
	if b.showHTML(preferHTML) {
		return b.remoteDone
	}
	return b.textDone
}

func (b *bodyView) cost() int {
	return 512 + len(b.text) + 128*len(b.layout.attachments) + 16*len(b.layout.blocks)
}

// rowsKey names a page of a message list. The cache keeps one rendering
// per page, tagged with the state it shows (rowsEntry): a newer state of
// the mailbox replaces the older rendering instead of adding to it, so
// opening messages (each sets \Seen and moves HIGHESTMODSEQ) does not fill
// the cache with pages nobody can see again.
type rowsKey struct {
	box    int64
	offset int
	limit  int
	spec   listSpec
	pane   bool // rows open in the reading pane
}

// rowsEntry is a page's rendered rows in one state of its mailbox, in one
// hour of local time (dates are written relative to today).
type rowsEntry struct {
	state rowsState
	html  template.HTML
}

// rowsState is what rendered rows depend on besides the page asked for.
type rowsState struct {
	validity uint32
	modseq   uint64
	hour     int64
	zone     int
}

// zoneOffset is the local zone's offset at t, in seconds.
func zoneOffset(t time.Time) int {
	_, off := t.Local().Zone()
	return off
}

// Cache bounds.
const (
	rowsCacheBytes   = 2 << 20 // rendered list pages (about 30 KB each)
	metaCacheEntries = 2048    // index entries (about 1–2 KB each)
	bodyCacheBytes   = 4 << 20 // rendered message text
	htmlCacheBytes   = 8 << 20 // sanitised HTML bodies
	orderCacheBytes  = 2 << 20 // sorted and threaded mailboxes (5 bytes a message)
)
