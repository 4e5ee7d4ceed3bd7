package imapd

import "pimail/internal/store"

// This file keeps \Recent for IMAP4rev1 sessions (RFC 3501 §2.3.2): a
// message is recent in exactly one session, the first to be told of it.
// The store keeps per mailbox the lowest UID no session has claimed
// (store.Recent). A read-write SELECT claims every message up to the
// highest it lists, and a session that learns of new messages claims
// them; whatever another session claimed first is not recent here.
// EXAMINE claims nothing: it shows the unclaimed messages as recent and
// leaves them to the next SELECT, as Dovecot does. IMAP4rev2 sessions
// (RFC 9051 has no \Recent) neither see nor claim it.

// claimsRecent reports whether this session claims \Recent.
func (s *session) claimsRecent() bool { return !s.rev2 && !s.sel.readOnly }

// markRecent marks which of the given UIDs of the view (ascending, the
// newest messages) are recent for this session.
func (s *session) markRecent(uids []uint32) {
	v := s.sel
	if len(uids) == 0 || s.rev2 {
		return
	}
	first := v.mb.FirstRecentUID
	// Nothing at or above the floor when the mailbox was read: nothing
	// to claim (the floor only rises).
	if s.claimsRecent() && uids[len(uids)-1] >= first {
		f, err := s.srv.st.ClaimRecent(s.ctx, v.mb.ID, uids[len(uids)-1])
		if err != nil {
			s.log.Error("imap claim recent", "mailbox", v.mb.ID, "err", err)
			return
		}
		first = f
	}
	lo, hi := max(first, uids[0]), uids[len(uids)-1]
	if lo > hi {
		return
	}
	// Claims of the next UIDs extend the last range: a session that
	// appends message after message keeps one range, not one each.
	if n := len(v.recent); n > 0 && v.recent[n-1].Stop+1 >= lo {
		v.recent[n-1].Stop = max(v.recent[n-1].Stop, hi)
		return
	}
	v.recent = append(v.recent, store.UIDRange{Start: lo, Stop: hi})
}

// isRecent reports whether uid is \Recent in this session. The ranges
// are few (one per claim), so a scan from the end, where new mail is,
// costs little.
func (v *mailboxView) isRecent(uid uint32) bool {
	for i := len(v.recent) - 1; i >= 0; i-- {
		if r := v.recent[i]; uid >= r.Start && uid <= r.Stop {
			return true
		}
	}
	return false
}

// recentCount is the number of messages of the view that are \Recent.
func (v *mailboxView) recentCount() int {
	n := 0
	for _, r := range v.recent {
		lo, _ := v.index(r.Start)
		hi, found := v.index(r.Stop)
		if found {
			hi++
		}
		n += hi - lo
	}
	return n
}
