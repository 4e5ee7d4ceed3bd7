package imapd

import (
	"fmt"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// This file holds the session side of CONDSTORE and QRESYNC (RFC 7162)
// that is not part of a single command: enabling, the QRESYNC parameter
// of SELECT/EXAMINE and VANISHED (EARLIER) responses. The store keeps a
// MODSEQ for every message and a tombstone for every expunge, so pimail
// never answers NOMODSEQ and needs no seq-match-data.

// enableCondStore turns CONDSTORE on. A CONDSTORE enabling command given
// while a mailbox is selected makes the server report that mailbox's
// HIGHESTMODSEQ at once (RFC 7162 §3.1).
func (s *session) enableCondStore() {
	if s.condstore {
		return
	}
	s.condstore = true
	if s.sel != nil {
		s.w.Raw("* OK [HIGHESTMODSEQ ").Number(s.sel.highestModSeq()).Raw("] Highest").CRLF()
	}
}

// highestModSeq is the HIGHESTMODSEQ the client may rely on: the view's,
// or a value below the pending expunges while they wait (RFC 7162 §3.2).
func (v *mailboxView) highestModSeq() uint64 {
	if len(v.pending) > 0 {
		return v.pendingFloor
	}
	return v.modseq
}

// maxKnownUID is the value of "*" in UID sets that may name expunged
// messages: the highest UID ever assigned in the mailbox.
func (v *mailboxView) maxKnownUID() uint32 {
	m := v.maxUID()
	if v.mb.UIDNext > 0 && v.mb.UIDNext-1 > m {
		m = v.mb.UIDNext - 1
	}
	return m
}

// writeVanishedEarlier reports the messages in set (all when nil) that were
// expunged after modseq, leaving out those still in the view: they get a
// plain VANISHED when their expunge is reported (RFC 7162 §3.2.5.1,
// §3.2.6, §3.2.10).
func (s *session) writeVanishedEarlier(expunged []uint32, set *imapwire.SeqSet) {
	v := s.sel
	max := v.maxKnownUID()
	if n := len(expunged); n > 0 && expunged[n-1] > max {
		max = expunged[n-1]
	}
	var out []uint32
	for _, uid := range expunged {
		if set != nil && !set.Contains(uid, max) {
			continue
		}
		if _, present := v.index(uid); present {
			continue
		}
		out = append(out, uid)
	}
	if len(out) > 0 {
		s.w.Raw("* VANISHED (EARLIER) ").Raw(imapwire.FormatUIDs(out)).CRLF()
	}
}

// qresyncSelect answers the QRESYNC parameter of SELECT/EXAMINE (RFC 7162
// §3.2.5): VANISHED (EARLIER) for what was expunged since the client's
// modseq, from the store's tombstones, then FETCH (UID FLAGS MODSEQ) for
// every message changed or added since, both limited to the known UIDs.
// A different UIDVALIDITY makes the parameter void: the client has to
// resynchronise from scratch.
func (s *session) qresyncSelect(q *imapwire.QResync) error {
	v := s.sel
	if q.UIDValidity != v.mb.UIDValidity {
		return nil
	}
	ch, err := s.srv.st.Changes(s.ctx, v.mb.ID, q.ModSeq)
	if err != nil {
		return fmt.Errorf("qresync changes of mailbox %d: %w", v.mb.ID, err)
	}
	s.writeVanishedEarlier(ch.Expunged, q.KnownUIDs)
	max := v.maxKnownUID()
	for i, uid := range v.uids {
		if v.flags[i].modseq <= q.ModSeq {
			continue
		}
		if q.KnownUIDs != nil && !q.KnownUIDs.Contains(uid, max) {
			continue
		}
		s.writeFlagsFetch(i, true)
	}
	return nil
}

// checkUnchangedSince splits view indexes into those whose current MODSEQ
// is at most since, which a conditional STORE may change, and those that
// fail the test (RFC 7162 §3.1.3). Messages expunged in the store are in
// neither list. The check reads current modseqs from the index just
// before the store writes, so a change by another session in between is
// not seen: the store has no conditional StoreFlags.
func (s *session) checkUnchangedSince(idx []int, since uint64) (pass, failed []int, err error) {
	v := s.sel
	if len(idx) == 0 {
		return nil, nil, nil
	}
	metas, err := s.srv.st.Fetch(s.ctx, v.mb.ID, v.uidSet(idx), store.FetchOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("unchangedsince check: %w", err)
	}
	cur := make(map[uint32]uint64, len(metas))
	for _, m := range metas {
		cur[m.UID] = m.ModSeq
	}
	for _, i := range idx {
		ms, ok := cur[v.uids[i]]
		switch {
		case !ok:
		case ms > since:
			failed = append(failed, i)
		default:
			pass = append(pass, i)
		}
	}
	return pass, failed, nil
}
