package imapd

import (
	"slices"

	"pimail/internal/imapwire"
)

// This file implements the contexts of RFC 5267 §4 (CONTEXT=SEARCH,
// CONTEXT=SORT): a SEARCH or SORT with RETURN (UPDATE) stays alive while
// the mailbox is selected, and whenever its result changes the session
// reports the difference as ADDTO and REMOVEFROM in an ESEARCH response
// tagged with the search's tag, until CANCELUPDATE or the end of the
// view. Results are kept as UIDs, so that expunges shift nothing.

// maxContexts bounds the live searches of one session; more are refused
// with NOUPDATE (RFC 5267 §4.3.1).
const maxContexts = 10

// updateContext is one live search.
type updateContext struct {
	tag      string
	uid      bool
	key      imapwire.SearchKey
	sortKeys []imapwire.SortKey // nil for SEARCH
	uids     []uint32           // the result last reported, in result order
	gen      viewGen            // the view's state when uids was computed
}

// viewGen identifies a state of the view: a result computed at one gen
// stays valid until the gen changes.
type viewGen struct {
	modseq           uint64
	exists, expunged int
}

func (v *mailboxView) gen() viewGen {
	return viewGen{v.modseq, len(v.uids), len(v.pending)}
}

// addContext keeps the search of cmd alive (RFC 5267 §4.2) and returns
// the response code for its tagged OK: NOUPDATE when too many are alive.
func (s *session) addContext(cmd *command, key imapwire.SearchKey, sortKeys []imapwire.SortKey, res searchResult) string {
	v := s.sel
	if len(v.contexts) >= maxContexts {
		return `NOUPDATE ` + quoteTag(cmd.tag)
	}
	for i, c := range v.contexts {
		if c.tag == cmd.tag { // a tag names one context: the new one wins
			v.contexts = slices.Delete(v.contexts, i, i+1)
			break
		}
	}
	v.contexts = append(v.contexts, &updateContext{tag: cmd.tag, uid: cmd.uid, key: key,
		sortKeys: sortKeys, uids: v.uidsOf(res.idx), gen: v.gen()})
	return ""
}

func quoteTag(tag string) string { return `"` + tag + `"` }

// cmdCancelUpdate implements CANCELUPDATE (RFC 5267 §4.3.5).
func cmdCancelUpdate(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) == 0 {
		return "", "", bad("CANCELUPDATE needs a tag")
	}
	v := s.sel
	for _, a := range cmd.args {
		tag, ok := a.AString()
		if !ok || a.Kind == imapwire.KindAtom {
			return "", "", bad("CANCELUPDATE takes quoted tags")
		}
		n := len(v.contexts)
		v.contexts = slices.DeleteFunc(v.contexts, func(c *updateContext) bool { return c.tag == tag })
		if len(v.contexts) == n {
			return "", "", no("", "no updating search with tag %s", tag)
		}
	}
	return "", "", nil
}

// updateContexts reruns the live searches whose result may have changed
// and reports the differences. Messages whose expunge is pending are no
// longer in any result: their REMOVEFROM precedes the EXPUNGE, in
// sequence numbers still valid (RFC 5267 §4.3.4).
func (s *session) updateContexts() {
	v := s.sel
	if v == nil || len(v.contexts) == 0 {
		return
	}
	g := v.gen()
	for _, c := range slices.Clone(v.contexts) {
		if c.gen == g {
			continue
		}
		res, err := s.search(c.key)
		if err == nil && c.sortKeys != nil {
			res, err = s.sortResult(res, c.sortKeys)
		}
		if err != nil {
			s.log.Error("imap context update", "tag", c.tag, "err", err)
			continue
		}
		uids := v.uidsOf(res.idx)
		s.writeContextDiff(c, uids)
		c.uids, c.gen = uids, g
	}
}

// writeContextDiff writes the ESEARCH response that turns c.uids into
// uids: REMOVEFROM for what left the result, ADDTO for what joined it.
// SEARCH results are sets, and both use position 0 (as Dovecot does); a
// SORT's additions carry their 1-based position in the new order, given
// in ascending order so that inserting them one after the other yields
// that order (RFC 5267 §4.3.2, §4.3.3). Sort keys never change, so what
// stays keeps its relative order.
func (s *session) writeContextDiff(c *updateContext, uids []uint32) {
	old := make(map[uint32]bool, len(c.uids))
	for _, u := range c.uids {
		old[u] = true
	}
	cur := make(map[uint32]bool, len(uids))
	for _, u := range uids {
		cur[u] = true
	}
	var removed []uint32
	for _, u := range c.uids {
		if !cur[u] {
			removed = append(removed, u)
		}
	}
	type run struct {
		pos  int
		nums []uint32
	}
	var added []run
	for p, u := range uids {
		if old[u] {
			continue
		}
		pos := 0
		if c.sortKeys != nil {
			pos = p + 1
		}
		if n := len(added); n > 0 && (pos == 0 || added[n-1].pos+len(added[n-1].nums) == pos) {
			added[n-1].nums = append(added[n-1].nums, u)
		} else {
			added = append(added, run{pos, []uint32{u}})
		}
	}
	if len(removed) == 0 && len(added) == 0 {
		return
	}
	nums := func(us []uint32) string {
		out := make([]uint32, 0, len(us))
		for _, u := range us {
			if c.uid {
				out = append(out, u)
			} else if i, ok := s.sel.index(u); ok {
				out = append(out, uint32(i+1))
			}
		}
		if c.sortKeys == nil {
			slices.Sort(out)
		}
		return imapwire.FormatUIDs(out)
	}
	w := s.w
	w.Raw("* ESEARCH (TAG ").String(c.tag).Byte(')')
	if c.uid {
		w.Raw(" UID")
	}
	if len(removed) > 0 {
		w.Raw(" REMOVEFROM (0 ").Raw(nums(removed)).Byte(')')
	}
	if len(added) > 0 {
		w.Raw(" ADDTO (")
		for i, r := range added {
			if i > 0 {
				w.SP()
			}
			w.Int(int64(r.pos)).SP().Raw(nums(r.nums))
		}
		w.Byte(')')
	}
	w.CRLF()
}
