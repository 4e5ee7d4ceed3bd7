package webmail

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"pimail/internal/mailthread"
	"pimail/internal/store"
)

// How a message list is ordered: by a key, either way, and optionally in
// conversations. The user's choice is kept in the preferences.
type listSpec struct {
	Sort    string // one of sortKeys
	Asc     bool
	Threads bool
}

// sortKeys are the orders offered, in the order the menu shows them.
var sortKeys = []struct{ Key, Label string }{
	{"arrival", "Received"}, {"date", "Sent date"}, {"from", "From"}, {"subject", "Subject"}, {"size", "Size"},
}

func validSort(k string) bool {
	return slices.ContainsFunc(sortKeys, func(s struct{ Key, Label string }) bool { return s.Key == k })
}

// spec is the list order in the preferences (newest received first when
// none is chosen).
func (p prefs) spec() listSpec {
	sp := listSpec{Sort: p.Sort, Asc: p.SortAsc, Threads: p.Threads}
	if !validSort(sp.Sort) {
		sp.Sort = "arrival"
	}
	return sp
}

// plain says whether the list is in UID order, newest first: the order
// the store pages itself (store.Lister), without reading the whole
// mailbox.
func (sp listSpec) plain() bool { return sp.Sort == "arrival" && !sp.Asc && !sp.Threads }

// ordered is a mailbox in a listSpec's order: its UIDs and, in threads,
// each message's depth in its conversation.
type ordered struct {
	uids  []uint32
	depth []uint8 // nil unless threaded
}

func (o *ordered) cost() int { return 64 + 5*len(o.uids) }

// orderKey names a mailbox's order in one state of its message set:
// UIDVALIDITY, UIDNEXT and the number of messages change whenever a
// message is added or removed (flags do not matter to any order).
type orderKey struct {
	box      int64
	validity uint32
	uidNext  uint32
	count    int
	spec     listSpec
}

// maxDepth bounds the indentation of a reply in the threaded view.
const maxDepth = 8

// order returns the mailbox's messages in the order of sp, from the cache
// while the message set is unchanged.
func (s *Server) order(ctx context.Context, box folder, sp listSpec) (*ordered, error) {
	key := orderKey{box: box.ID, validity: box.UIDValidity, uidNext: box.UIDNext, count: box.Messages, spec: sp}
	if o, ok := s.orders.get(key); ok && box.UIDNext != 0 {
		return o, nil
	}
	keys, err := s.st.SortKeys(ctx, box.ID)
	if err != nil {
		return nil, fmt.Errorf("sort keys of mailbox %d: %w", box.ID, err)
	}
	o := orderKeys(keys, sp, box.Special == store.SpecialSent || box.Special == store.SpecialDrafts)
	if box.UIDNext != 0 {
		s.orders.put(key, o, o.cost())
	}
	return o, nil
}

// sortItem is a message with the value its list is ordered by.
type sortItem struct {
	uid  uint32
	date time.Time
	text string
	size int64
}

// compare orders two messages by sp's key, ascending, ties by UID.
func (sp listSpec) compare(a, b *sortItem) int {
	var c int
	switch sp.Sort {
	case "date":
		c = a.date.Compare(b.date)
	case "from", "subject":
		c = strings.Compare(a.text, b.text)
	case "size":
		c = cmp.Compare(a.size, b.size)
	}
	if c == 0 {
		c = cmp.Compare(a.uid, b.uid)
	}
	return c
}

// orderKeys sorts a mailbox's keys (ascending UIDs) by sp. showTo sorts
// "from" by the recipients (Sent, Drafts), as the list shows them.
func orderKeys(keys []store.SortKey, sp listSpec, showTo bool) *ordered {
	items := make([]sortItem, len(keys))
	for i := range keys {
		k := &keys[i]
		it := sortItem{uid: k.UID, size: k.Size, date: k.Date}
		if it.date.IsZero() {
			it.date = k.InternalDate
		}
		switch sp.Sort {
		case "from":
			addrs := k.From
			if showTo {
				addrs = k.To
			}
			label, _ := firstAddr(addrs)
			it.text = strings.ToLower(label)
		case "subject":
			base, _ := mailthread.BaseSubject(k.Subject)
			it.text = strings.ToLower(base)
		}
		items[i] = it
	}
	dir := func(c int) int {
		if sp.Asc {
			return c
		}
		return -c
	}
	o := &ordered{uids: make([]uint32, 0, len(keys))}
	if !sp.Threads {
		slices.SortFunc(items, func(a, b sortItem) int { return dir(sp.compare(&a, &b)) })
		for i := range items {
			o.uids = append(o.uids, items[i].uid)
		}
		return o
	}
	// Conversations (RFC 5256 REFERENCES, as IMAP THREAD answers): each
	// thread is placed by its newest message for the date orders, by its
	// first message otherwise; within a thread, replies follow what they
	// answer, oldest first.
	msgs := make([]mailthread.Message, len(keys))
	for i := range keys {
		k := &keys[i]
		msgs[i] = mailthread.Message{MessageID: k.MessageID, InReplyTo: k.InReplyTo, References: k.References,
			Subject: k.Subject, Sent: items[i].date}
	}
	roots := mailthread.References(msgs)
	lead := make([]*sortItem, len(roots))
	for i, r := range roots {
		mailthread.Walk([]*mailthread.Node{r}, func(n *mailthread.Node, _ int) {
			if n.Index < 0 {
				return
			}
			it := &items[n.Index]
			switch {
			case lead[i] == nil:
				lead[i] = it
			case (sp.Sort == "arrival" || sp.Sort == "date") && sp.compare(it, lead[i]) > 0:
				lead[i] = it
			}
		})
	}
	idx := make([]int, len(roots))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return dir(sp.compare(lead[a], lead[b])) })
	o.depth = make([]uint8, 0, len(keys))
	var walk func(n *mailthread.Node, depth int)
	walk = func(n *mailthread.Node, depth int) {
		if n.Index >= 0 {
			o.uids = append(o.uids, items[n.Index].uid)
			o.depth = append(o.depth, uint8(min(depth, maxDepth)))
			depth++
		}
		for _, c := range n.Children {
			walk(c, depth)
		}
	}
	for _, i := range idx {
		walk(roots[i], 0)
	}
	return o
}

// viewSubmit keeps the order chosen in a list's toolbar (sort, order,
// threads) in the preferences and shows the list again from its first
// page.
func (s *Server) viewSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	sp := listSpec{Sort: r.PostFormValue("sort"), Asc: r.PostFormValue("order") == "asc", Threads: r.PostFormValue("threads") == "1"}
	if !validSort(sp.Sort) {
		s.httpError(w, r, http.StatusBadRequest, "Unknown order.", nil)
		return
	}
	if err := s.prefs.update(r.Context(), sess.AccountID, func(p *prefs) {
		p.Sort, p.SortAsc, p.Threads = sp.Sort, sp.Asc, sp.Threads
	}); err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The order could not be saved.", err)
		return
	}
	next := "/"
	if box, err := s.mailboxOf(r.Context(), sess.AccountID, r.PostFormValue("box")); err == nil {
		next = "/box/" + strconv.FormatInt(box.ID, 10)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// spliced passes the open message's pre-rendered text to render.
func (d listData) spliced() (slot, text string) {
	if d.Msg == nil {
		return "", ""
	}
	return d.Msg.spliced()
}
