package imapd

import (
	"fmt"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// cmdSelect implements SELECT and EXAMINE (RFC 9051 §6.3.2, §6.3.3;
// RFC 3501 §6.3.1 for IMAP4rev1 sessions).
func cmdSelect(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 1 && len(cmd.args) != 2 {
		return "", "", bad("%s needs a mailbox name", cmd.name)
	}
	name, err := s.decodeName(cmd.args[0])
	if err != nil {
		return "", "", err
	}
	var params imapwire.SelectParams
	if len(cmd.args) == 2 {
		if params, err = imapwire.ParseSelectParams(cmd.args[1]); err != nil {
			return "", "", bad("invalid %s parameters", cmd.name)
		}
		// RFC 7162 §3.2.5: QRESYNC only after ENABLE QRESYNC.
		if params.QResync != nil && !s.qresync {
			return "", "", bad("QRESYNC is not enabled")
		}
	}
	if s.sel != nil {
		// RFC 9051 §6.3.2: deselect first, and say so with [CLOSED].
		s.sel = nil
		s.state = stateAuth
		s.w.Untagged("OK [CLOSED] Previous mailbox closed")
	}
	mb, err := s.srv.st.Mailbox(s.ctx, s.acct.ID, name)
	if err != nil {
		return "", "", storeErr(err, "mailbox")
	}
	msgs, err := s.srv.st.UIDs(s.ctx, mb.ID)
	if err != nil {
		return "", "", fmt.Errorf("listing mailbox %d: %w", mb.ID, err)
	}
	readOnly := cmd.name == "EXAMINE"
	v := newView(mb, msgs, readOnly)
	s.sel = v
	s.state = stateSelected
	s.expunged = false
	if params.CondStore {
		s.condstore = true // RFC 7162 §3.1.8: a CONDSTORE enabling command
	}
	s.drainEvents() // events up to now are covered by the snapshot's modseq
	v.dirty = true  // but re-check once: the snapshot and modseq were read apart
	s.markRecent(v.uids)
	for _, k := range v.keywords() {
		v.announced[k] = true
	}

	w := s.w
	w.Raw("* ").Int(int64(len(v.uids))).Raw(" EXISTS").CRLF()
	if !s.rev2 {
		w.Raw("* ").Int(int64(v.recentCount())).Raw(" RECENT").CRLF()
	}
	s.writeMailboxFlags()
	w.Raw("* OK [UIDVALIDITY ").Number(uint64(mb.UIDValidity)).Raw("] UIDs valid").CRLF()
	uidNext := mb.UIDNext
	if m := v.maxUID(); uidNext <= m {
		uidNext = m + 1
	}
	w.Raw("* OK [UIDNEXT ").Number(uint64(uidNext)).Raw("] Predicted next UID").CRLF()
	// RFC 7162 §3.1.2.1: every mailbox has persistent modseqs, so every
	// SELECT/EXAMINE reports HIGHESTMODSEQ (never NOMODSEQ).
	w.Raw("* OK [HIGHESTMODSEQ ").Number(v.modseq).Raw("] Highest").CRLF()
	w.Raw("* OK [MAILBOXID (").Raw(mailboxObjectID(mb.ID)).Raw(")] Ok").CRLF() // RFC 8474 §4.3
	if !s.rev2 {
		for i, f := range v.flags {
			if f.flags&store.FlagSeen == 0 {
				w.Raw("* OK [UNSEEN ").Int(int64(i + 1)).Raw("] First unseen").CRLF()
				break
			}
		}
	} else {
		// RFC 9051 §6.3.2: the LIST response for the selected mailbox.
		w.Raw("* LIST () \"/\" ")
		s.writeName(mb.Name)
		w.CRLF()
	}
	if params.QResync != nil {
		if err := s.qresyncSelect(params.QResync); err != nil {
			return "", "", err
		}
	}
	if readOnly {
		return "READ-ONLY", "EXAMINE completed", nil
	}
	return "READ-WRITE", "SELECT completed", nil
}

// cmdClose implements CLOSE (RFC 9051 §6.4.1): silently expunge \Deleted
// messages when read-write, then deselect.
func cmdClose(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 0 {
		return "", "", bad("CLOSE takes no arguments")
	}
	v := s.sel
	s.sel = nil
	s.state = stateAuth
	if !v.readOnly {
		if _, err := s.srv.st.Expunge(s.ctx, v.mb.ID, nil); err != nil {
			return "", "", fmt.Errorf("expunge on close: %w", err)
		}
	}
	return "", "", nil
}

// cmdUnselect implements UNSELECT (RFC 3691, RFC 9051 §6.4.2).
func cmdUnselect(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 0 {
		return "", "", bad("UNSELECT takes no arguments")
	}
	s.sel = nil
	s.state = stateAuth
	return "", "", nil
}
