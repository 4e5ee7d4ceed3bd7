package imapd

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// msgFlags is what a session last reported of a message's flags, with
// the message's MODSEQ (RFC 7162 §3.1.1) as the session knows it.
type msgFlags struct {
	flags    store.Flags
	keywords []string
	modseq   uint64
}

func (a msgFlags) equal(b msgFlags) bool {
	return a.flags == b.flags && slices.Equal(a.keywords, b.keywords)
}

// mailboxView is a session's view of its selected mailbox (RFC 9051
// §2.3.1.2): message sequence numbers are positions in uids, which change
// only when this session reports EXISTS or EXPUNGE.
type mailboxView struct {
	mb       store.Mailbox
	readOnly bool
	uids     []uint32 // ascending; seq = index+1
	flags    []msgFlags
	recent   store.UIDSet // ascending ranges of UIDs \Recent in this session (recent.go)
	modseq   uint64       // changes up to here are known
	// pending are UIDs expunged in the store but not yet reported
	// (RFC 9051 §7.5.1 forbids EXPUNGE during FETCH/STORE/SEARCH).
	pending map[uint32]bool
	// pendingFloor is a modseq below every pending expunge's: while
	// expunges wait, QRESYNC clients are told this HIGHESTMODSEQ so that
	// a resynchronisation after a lost connection still finds them
	// (RFC 7162 §3.2).
	pendingFloor uint64
	dirty        bool     // a change event arrived or this session changed the mailbox
	saved        []uint32 // SEARCHRES "$" (RFC 5182), ascending UIDs
	// announced are the keywords the last FLAGS response listed.
	announced map[string]bool
	contexts  []*updateContext // live searches (RFC 5267 §4, context.go)
}

// index returns the position of uid in the view.
func (v *mailboxView) index(uid uint32) (int, bool) {
	i := sort.Search(len(v.uids), func(i int) bool { return v.uids[i] >= uid })
	return i, i < len(v.uids) && v.uids[i] == uid
}

func (v *mailboxView) maxUID() uint32 {
	if len(v.uids) == 0 {
		return 0
	}
	return v.uids[len(v.uids)-1]
}

// resolve turns a sequence set or UID set into ascending view indexes.
// Sequence numbers beyond the mailbox are an error (RFC 9051 §6.4.5
// answers invalid numbers with BAD); UIDs not present are ignored.
func (v *mailboxView) resolve(set imapwire.SeqSet, uid bool) ([]int, error) {
	if set.Saved {
		return v.savedIndexes(), nil
	}
	n := len(v.uids)
	type span struct{ lo, hi int } // indexes, inclusive
	var spans []span
	for _, r := range set.Ranges {
		if uid {
			lo, hi := r.Resolve(v.maxUID())
			if n == 0 {
				continue
			}
			a, _ := v.index(lo)
			b := sort.Search(n, func(i int) bool { return v.uids[i] > hi }) - 1
			if a <= b {
				spans = append(spans, span{a, b})
			}
			continue
		}
		// "n:*" is valid whatever n ("*:n" is n:*): "*" is the last
		// message (RFC 9051 §9, seq-range), so 5:* of two messages is
		// 2:5, of which only 2 exists. Only explicit numbers beyond the
		// mailbox are an error.
		if r.Start != 0 && r.Stop != 0 && (r.Start > uint32(n) || r.Stop > uint32(n)) {
			return nil, bad("invalid message sequence number")
		}
		if n == 0 {
			continue
		}
		lo, hi := r.Resolve(uint32(n))
		spans = append(spans, span{int(min(lo, uint32(n))) - 1, int(min(hi, uint32(n))) - 1})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var out []int
	next := 0
	for _, sp := range spans {
		lo := max(sp.lo, next)
		for i := lo; i <= sp.hi; i++ {
			out = append(out, i)
		}
		next = max(next, sp.hi+1)
	}
	return out, nil
}

// uidSet builds a store UID set covering the given ascending indexes.
func (v *mailboxView) uidSet(idx []int) store.UIDSet {
	var set store.UIDSet
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		set = append(set, store.UIDRange{Start: v.uids[idx[i]], Stop: v.uids[idx[j]]})
		i = j + 1
	}
	return set
}

// uidsOf returns the UIDs at the given indexes.
func (v *mailboxView) uidsOf(idx []int) []uint32 {
	out := make([]uint32, len(idx))
	for i, x := range idx {
		out[i] = v.uids[x]
	}
	return out
}

// newView builds a view from the store's message list. The modseq is the
// mailbox's, read before the list: changes in between are reported again
// and deduplicated rather than lost.
func newView(mb store.Mailbox, msgs []store.MessageMeta, readOnly bool) *mailboxView {
	v := &mailboxView{mb: mb, readOnly: readOnly, modseq: mb.HighestModSeq,
		pending: map[uint32]bool{}, announced: map[string]bool{}}
	v.uids = make([]uint32, 0, len(msgs))
	v.flags = make([]msgFlags, 0, len(msgs))
	for _, m := range msgs {
		if n := len(v.uids); n > 0 && v.uids[n-1] >= m.UID {
			continue // not ascending: ignore a duplicate
		}
		v.uids = append(v.uids, m.UID)
		v.flags = append(v.flags, msgFlags{m.Flags, m.Keywords, m.ModSeq})
	}
	return v
}

// syncMailbox reads the store's changes since the view's modseq and
// reports them: EXPUNGE (when allowed), EXISTS/RECENT for new messages and
// FETCH FLAGS for flag changes made elsewhere. force reads changes even
// when no event said something happened (NOOP, CHECK).
func (s *session) syncMailbox(allowExpunge, force bool) error {
	v := s.sel
	if v == nil {
		return nil
	}
	s.drainEvents()
	if v.dirty || force {
		v.dirty = false
		ch, err := s.srv.st.Changes(s.ctx, v.mb.ID, v.modseq)
		if errors.Is(err, store.ErrNotFound) {
			// The mailbox was deleted by another session: nothing
			// sensible can continue in it.
			s.w.Untagged("BYE Selected mailbox was deleted")
			s.sel = nil
			s.state = stateLogout
			return nil
		}
		if err != nil {
			return fmt.Errorf("changes of mailbox %d: %w", v.mb.ID, err)
		}
		s.applyChanges(ch)
	}
	if allowExpunge && len(v.pending) > 0 {
		s.reportExpunges()
	} else {
		s.updateContexts()
	}
	s.reportModSeq()
	return nil
}

// reportModSeq tells a CONDSTORE client the mailbox's HIGHESTMODSEQ after
// expunges, which no FETCH response would carry (RFC 7162 §3.1.2.1);
// while expunges wait to be reported, a QRESYNC client gets a value below
// all of them instead (RFC 7162 §3.2 and its §6 example).
func (s *session) reportModSeq() {
	v := s.sel
	if !s.condstore || v == nil {
		return
	}
	switch {
	case len(v.pending) > 0 && s.qresync:
		s.w.Raw("* OK [HIGHESTMODSEQ ").Number(v.pendingFloor).Raw("] Expunges pending").CRLF()
	case len(v.pending) == 0 && s.expunged && !v.dirty:
		s.w.Raw("* OK [HIGHESTMODSEQ ").Number(v.modseq).Raw("] Highest").CRLF()
		s.expunged = false
	}
}

// noteEvent marks the view dirty for an event of its mailbox and keeps
// the others for NOTIFY.
func (s *session) noteEvent(ev store.Event) {
	if s.sel != nil && ev.MailboxID == s.sel.mb.ID {
		s.sel.dirty = true
	}
	if s.notify != nil {
		s.notify.noteEvent(ev)
	}
}

// drainEvents marks the view dirty when an event for it is waiting.
func (s *session) drainEvents() {
	if s.events == nil || s.sel == nil && s.notify == nil {
		return
	}
	for i := 0; i < 1000; i++ {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.events = nil
				return
			}
			s.noteEvent(ev)
		default:
			return
		}
	}
}

// applyChanges folds a Changes result into the view, writing EXISTS,
// RECENT and FETCH responses; expunges are queued as pending.
func (s *session) applyChanges(ch store.Changes) {
	v := s.sel
	var flagChanged []uint32
	added := 0
	for _, m := range ch.Updated {
		if v.pending[m.UID] {
			continue
		}
		if i, ok := v.index(m.UID); ok {
			nf := msgFlags{m.Flags, m.Keywords, m.ModSeq}
			if !v.flags[i].equal(nf) {
				flagChanged = append(flagChanged, m.UID)
			}
			if v.flags[i].modseq < nf.modseq || !v.flags[i].equal(nf) {
				v.flags[i] = nf
			}
			continue
		}
		if m.UID > v.maxUID() {
			v.uids = append(v.uids, m.UID)
			v.flags = append(v.flags, msgFlags{m.Flags, m.Keywords, m.ModSeq})
			added++
		}
	}
	if added > 0 {
		s.markRecent(v.uids[len(v.uids)-added:])
	}
	for _, uid := range ch.Expunged {
		if _, ok := v.index(uid); ok {
			if len(v.pending) == 0 {
				v.pendingFloor = v.modseq
			}
			v.pending[uid] = true
		}
	}
	if ch.HighestModSeq > v.modseq {
		v.modseq = ch.HighestModSeq
	}
	if added > 0 {
		s.w.Raw("* ").Int(int64(len(v.uids))).Raw(" EXISTS").CRLF()
		if !s.rev2 {
			s.w.Raw("* ").Int(int64(v.recentCount())).Raw(" RECENT").CRLF()
		}
		for _, f := range v.flags[len(v.flags)-added:] {
			s.announceKeywords(f.keywords)
		}
	}
	for _, uid := range flagChanged {
		if i, ok := v.index(uid); ok {
			s.writeFlagsFetch(i, true)
		}
	}
}

// reportExpunges sends EXPUNGE for pending messages, highest sequence
// number first so that every number is valid when sent (RFC 9051 §7.5.1),
// or one VANISHED response once QRESYNC is enabled (RFC 7162 §3.2.10).
func (s *session) reportExpunges() {
	v := s.sel
	s.updateContexts() // REMOVEFROM in the numbers before the expunges
	var idx []int
	for uid := range v.pending {
		if i, ok := v.index(uid); ok {
			idx = append(idx, i)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(idx)))
	if s.qresync {
		if len(idx) > 0 {
			uids := make([]uint32, len(idx))
			for n, i := range idx {
				uids[len(idx)-1-n] = v.uids[i]
			}
			s.w.Raw("* VANISHED ").Raw(imapwire.FormatUIDs(uids)).CRLF()
		}
	} else {
		for _, i := range idx {
			s.w.Raw("* ").Int(int64(i + 1)).Raw(" EXPUNGE").CRLF()
		}
	}
	s.removeIndexes(idx)
	clear(v.pending)
	s.expunged = s.expunged || len(idx) > 0
}

// removeIndexes drops messages from the view (idx in any order).
func (s *session) removeIndexes(idx []int) {
	v := s.sel
	if len(idx) == 0 {
		return
	}
	drop := make(map[int]bool, len(idx))
	for _, i := range idx {
		drop[i] = true
	}
	j := 0
	for i := range v.uids {
		if drop[i] {
			continue
		}
		v.uids[j], v.flags[j] = v.uids[i], v.flags[i]
		j++
	}
	clear(v.flags[j:])
	v.uids, v.flags = v.uids[:j], v.flags[:j]
}

// expungeNow reports the given expunged UIDs at once (EXPUNGE, MOVE, CLOSE
// paths, where the command itself removes messages).
func (s *session) expungeNow(uids []uint32) {
	for _, u := range uids {
		s.sel.pending[u] = true
	}
	s.reportExpunges()
}

// writeFlagsFetch writes "* n FETCH (UID u FLAGS (...))" for view index i.
// Once CONDSTORE is enabled, every such response carries the UID and the
// MODSEQ (RFC 7162 §3.1, as corrected by erratum 1807).
func (s *session) writeFlagsFetch(i int, withUID bool) {
	v := s.sel
	s.announceKeywords(v.flags[i].keywords)
	s.w.Raw("* ").Int(int64(i + 1)).Raw(" FETCH (")
	if withUID || s.condstore {
		s.w.Raw("UID ").Number(uint64(v.uids[i])).SP()
	}
	s.w.Raw("FLAGS ")
	s.writeFlags(v.flags[i], v.isRecent(v.uids[i]))
	if s.condstore {
		s.w.Raw(" MODSEQ (").Number(v.flags[i].modseq).Byte(')')
	}
	s.w.Raw(")").CRLF()
}
