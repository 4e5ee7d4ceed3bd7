// Package mailthread groups messages into conversations and compares
// subjects the way IMAP's THREAD and SORT do (RFC 5256): the base subject
// of §2.1, and the ORDEREDSUBJECT and REFERENCES threading algorithms of
// §4. imapd answers THREAD with it; the webmail's threaded view uses the
// same REFERENCES threads, so a conversation looks the same in both.
//
// It knows nothing of where messages come from: callers give the header
// values the algorithms read, in mailbox order (the final tie-break).
package mailthread

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Message is what threading reads of one message.
type Message struct {
	MessageID  string   // the Message-ID field, with or without angle brackets
	InReplyTo  string   // the In-Reply-To field as in the header
	References []string // the References field's ids, in order, with or without brackets
	Subject    string   // decoded
	Sent       time.Time
}

// Node is a thread container. Index is the position of its message in the
// slice given to References or OrderedSubject, or -1 for a dummy: a
// message that is referred to but not among them.
type Node struct {
	Index    int
	Children []*Node
}

// item is a Message with what the algorithms compare.
type item struct {
	idx    int
	sent   time.Time
	base   string // base subject, folded for i;ascii-casemap
	isRepl bool
}

func items(msgs []Message) []item {
	out := make([]item, len(msgs))
	for i, m := range msgs {
		base, reply := BaseSubject(m.Subject)
		out[i] = item{idx: i, sent: m.Sent, base: FoldASCII(base), isRepl: reply}
	}
	return out
}

// thrNode is a container while threads are built; item is nil for a
// dummy.
type thrNode struct {
	item     *item
	parent   *thrNode
	children []*thrNode
}

func (n *thrNode) unlink() {
	if p := n.parent; p != nil {
		p.children = slices.DeleteFunc(p.children, func(c *thrNode) bool { return c == n })
		n.parent = nil
	}
}

func (n *thrNode) adopt(c *thrNode) {
	c.unlink()
	c.parent = n
	n.children = append(n.children, c)
}

// isAncestor reports whether a is b or one of b's ancestors.
func isAncestor(a, b *thrNode) bool {
	for n := b; n != nil; n = n.parent {
		if n == a {
			return true
		}
	}
	return false
}

// normMsgID strips the angle brackets and blanks of a message id.
func normMsgID(s string) string {
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "<"), ">"))
}

// firstMsgID returns the first "<...>" message id of an In-Reply-To field.
func firstMsgID(s string) string {
	i := strings.IndexByte(s, '<')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(s[i:], '>')
	if j < 0 {
		return ""
	}
	return normMsgID(s[i : i+j+1])
}

// References builds threads by the REFERENCES algorithm (RFC 5256 §4,
// after Jamie Zawinski's description) and returns the roots in order.
func References(msgs []Message) []*Node {
	its := items(msgs)
	byID := map[string]*thrNode{}
	var all []*thrNode
	get := func(id string) *thrNode {
		n := byID[id]
		if n == nil {
			n = &thrNode{}
			byID[id] = n
			all = append(all, n)
		}
		return n
	}
	for i := range msgs {
		m := &msgs[i]
		// Step 1A: the container of this message; a missing or
		// duplicate Message-ID gets a container of its own.
		var n *thrNode
		if id := normMsgID(m.MessageID); id != "" {
			if c := get(id); c.item == nil {
				n = c
			}
		}
		if n == nil {
			n = &thrNode{}
			all = append(all, n)
		}
		n.item = &its[i]
		refs := m.References
		if len(refs) == 0 {
			if irt := firstMsgID(m.InReplyTo); irt != "" {
				refs = []string{irt}
			}
		}
		// Link the references in order, keeping existing links and
		// never creating a loop.
		var prev *thrNode
		for _, r := range refs {
			r = normMsgID(r)
			if r == "" {
				continue
			}
			c := get(r)
			if prev != nil && c != prev && c.parent == nil && !isAncestor(c, prev) {
				prev.adopt(c)
			}
			prev = c
		}
		// Step 1B: the last reference is this message's parent.
		n.unlink()
		if prev != nil && !isAncestor(n, prev) {
			prev.adopt(n)
		}
	}
	// Step 2: the root set.
	var roots []*thrNode
	for _, n := range all {
		if n.parent == nil {
			roots = append(roots, n)
		}
	}
	// Step 4: prune dummies.
	roots = pruneDummies(roots, true)
	for _, r := range roots {
		r.parent = nil
	}
	// Step 5: gather root threads with the same base subject.
	roots = mergeBySubject(roots)
	// Step 6: siblings by sent date.
	sortSiblings(roots)
	return export(roots)
}

// export turns the containers into Nodes.
func export(list []*thrNode) []*Node {
	out := make([]*Node, len(list))
	for i, n := range list {
		e := &Node{Index: -1}
		if n.item != nil {
			e.Index = n.item.idx
		}
		e.Children = export(n.children)
		out[i] = e
	}
	return out
}

// pruneDummies removes dummies without children and replaces dummies by
// their children, except that a dummy at the root keeps two or more
// children together (RFC 5256 §4 step 4).
func pruneDummies(list []*thrNode, root bool) []*thrNode {
	var out []*thrNode
	for _, n := range list {
		n.children = pruneDummies(n.children, false)
		for _, c := range n.children {
			c.parent = n
		}
		if n.item == nil {
			if len(n.children) == 0 {
				continue
			}
			if !root || len(n.children) == 1 {
				out = append(out, n.children...)
				continue
			}
		}
		out = append(out, n)
	}
	return out
}

// threadSubject is the base subject of a root: its message's, or for a
// dummy its first child's.
func threadSubject(n *thrNode) (key string, reply bool) {
	it := n.item
	if it == nil {
		if len(n.children) == 0 || n.children[0].item == nil {
			return "", false
		}
		return n.children[0].item.base, false
	}
	return it.base, it.isRepl
}

// mergeBySubject is RFC 5256 §4 step 5.
func mergeBySubject(roots []*thrNode) []*thrNode {
	table := map[string]*thrNode{}
	for _, r := range roots {
		key, reply := threadSubject(r)
		if key == "" {
			continue
		}
		old := table[key]
		if old == nil {
			table[key] = r
			continue
		}
		_, oldReply := threadSubject(old)
		if r.item == nil && old.item != nil || old.item != nil && r.item != nil && oldReply && !reply {
			table[key] = r
		}
	}
	replaced := map[*thrNode]*thrNode{} // table container → new dummy in its place
	dropped := map[*thrNode]bool{}
	for _, r := range roots {
		key, reply := threadSubject(r)
		t := table[key]
		if key == "" || t == nil || t == r {
			continue
		}
		_, tReply := threadSubject(t)
		switch {
		case t.item == nil && r.item == nil:
			for _, c := range slices.Clone(r.children) {
				t.adopt(c)
			}
		case t.item == nil:
			t.adopt(r)
		case !tReply && reply && r.item != nil:
			t.adopt(r)
		default:
			d := &thrNode{}
			if p, ok := replaced[t]; ok {
				d = p
			} else {
				replaced[t] = d
				d.adopt(t)
			}
			d.adopt(r)
			table[key] = t // later matches keep merging into the same dummy
		}
		dropped[r] = true
	}
	var out []*thrNode
	for _, r := range roots {
		if dropped[r] {
			continue
		}
		if d, ok := replaced[r]; ok {
			out = append(out, d)
			continue
		}
		out = append(out, r)
	}
	for _, r := range out {
		r.parent = nil
	}
	return out
}

// sortSiblings orders every level by sent date, a dummy taking the date
// of its first child, ties in mailbox order (RFC 5256 §4 step 6).
func sortSiblings(list []*thrNode) {
	for _, n := range list {
		sortSiblings(n.children)
	}
	slices.SortStableFunc(list, func(a, b *thrNode) int {
		x, y := firstItem(a), firstItem(b)
		if x == nil || y == nil {
			return 0
		}
		if c := x.sent.Compare(y.sent); c != 0 {
			return c
		}
		return cmp.Compare(x.idx, y.idx)
	})
}

func firstItem(n *thrNode) *item {
	for i := 0; n != nil && i < 1000; i++ {
		if n.item != nil {
			return n.item
		}
		if len(n.children) == 0 {
			return nil
		}
		n = n.children[0]
	}
	return nil
}

// OrderedSubject groups by base subject, each thread's first message by
// date being the parent of the others; threads are ordered by the date of
// their first message (RFC 5256 §4, ORDEREDSUBJECT).
func OrderedSubject(msgs []Message) []*Node {
	its := items(msgs)
	sorted := make([]*item, len(its))
	for i := range its {
		sorted[i] = &its[i]
	}
	slices.SortStableFunc(sorted, func(a, b *item) int {
		if c := strings.Compare(a.base, b.base); c != 0 {
			return c
		}
		if c := a.sent.Compare(b.sent); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	var roots []*thrNode
	var cur *thrNode
	for i, it := range sorted {
		if i > 0 && it.base == sorted[i-1].base {
			cur.adopt(&thrNode{item: it})
			continue
		}
		cur = &thrNode{item: it}
		roots = append(roots, cur)
	}
	slices.SortStableFunc(roots, func(a, b *thrNode) int {
		if c := a.item.sent.Compare(b.item.sent); c != 0 {
			return c
		}
		return cmp.Compare(a.item.idx, b.item.idx)
	})
	return export(roots)
}

// Walk calls fn for every node of the threads in display order (a parent
// before its children), with its depth (0 for a root).
func Walk(roots []*Node, fn func(n *Node, depth int)) {
	var walk func(list []*Node, depth int)
	walk = func(list []*Node, depth int) {
		for _, n := range list {
			fn(n, depth)
			walk(n.Children, depth+1)
		}
	}
	walk(roots, 0)
}
