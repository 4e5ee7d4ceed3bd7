package imapd

import (
	"slices"
	"strings"

	"pimail/internal/store"
)

// JunkTrainer learns from what users mark as junk: a message moved or
// copied into the Junk mailbox (special use \Junk, RFC 6154) or flagged
// $Junk is spam to that account; one moved out of Junk (but not to the
// Trash) or flagged $NotJunk is ham. The keywords are the ones IANA
// registered for this (RFC 5788 registry; $Junk and $NotJunk).
//
// Junk must not block: it is called while an IMAP command runs, so an
// implementation queues the work (internal/spam's JunkLearner does).
type JunkTrainer interface {
	Junk(accountID, blobID int64, spam bool)
}

// maxJunkPerCommand bounds the messages one command hands to the trainer;
// a user who moves ten thousand messages at once is cleaning up, and the
// first thousand teach the model as much.
const maxJunkPerCommand = 1000

// junkKeywords says what a STORE tells: adding (or setting) $Junk is
// spam, $NotJunk ham; removing either says nothing, and so does a STORE
// that sets both.
func junkKeywords(op store.FlagOp, keywords []string) (spam, ok bool) {
	if op == store.FlagsRemove {
		return false, false
	}
	has := func(k string) bool {
		return slices.ContainsFunc(keywords, func(x string) bool { return strings.EqualFold(x, k) })
	}
	junk, notJunk := has("$Junk"), has("$NotJunk")
	if junk == notJunk {
		return false, false
	}
	return junk, true
}

// reportJunk hands the messages uids of mailbox mailboxID to the trainer.
// It looks up their blobs (one indexed read, done only when the command
// said something about junk); the training itself happens elsewhere.
func (s *session) reportJunk(mailboxID int64, uids []uint32, spam bool) {
	t := s.srv.cfg.Junk
	if t == nil || len(uids) == 0 {
		return
	}
	if len(uids) > maxJunkPerCommand {
		uids = uids[:maxJunkPerCommand]
	}
	set := make(store.UIDSet, len(uids))
	for i, u := range uids {
		set[i] = store.UIDRange{Start: u, Stop: u}
	}
	metas, err := s.srv.st.Fetch(s.ctx, mailboxID, set, store.FetchOptions{})
	if err != nil {
		s.srv.log.Warn("junk training: cannot read the messages", "account", s.acct.ID, "err", err)
		return
	}
	for _, m := range metas {
		t.Junk(s.acct.ID, m.BlobID, spam)
	}
}
