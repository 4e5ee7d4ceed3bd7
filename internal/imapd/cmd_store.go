package imapd

import (
	"fmt"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// cmdStore implements STORE and UID STORE (RFC 9051 §6.4.6) with the
// UNCHANGEDSINCE modifier (RFC 7162 §3.1.3).
func cmdStore(s *session, cmd *command) (string, string, error) {
	args := cmd.args
	if len(args) < 3 {
		return "", "", bad("STORE needs a set, an item and flags")
	}
	set, err := imapwire.ParseSeqSet(args[0].Str)
	if err != nil || args[0].Kind != imapwire.KindAtom {
		return "", "", bad("invalid sequence set")
	}
	args = args[1:]
	conditional := false
	var unchangedSince uint64
	if args[0].Kind == imapwire.KindList {
		if unchangedSince, err = imapwire.ParseStoreModifiers(args[0]); err != nil {
			return "", "", bad("invalid STORE modifiers")
		}
		conditional = true
		args = args[1:]
		if len(args) < 2 {
			return "", "", bad("STORE needs an item and flags")
		}
	}
	if args[0].Kind != imapwire.KindAtom {
		return "", "", bad("unknown STORE item")
	}
	item := upperASCII(args[0].Str)
	silent := strings.HasSuffix(item, ".SILENT")
	item = strings.TrimSuffix(item, ".SILENT")
	var op store.FlagOp
	switch item {
	case "FLAGS":
		op = store.FlagsReplace
	case "+FLAGS":
		op = store.FlagsAdd
	case "-FLAGS":
		op = store.FlagsRemove
	default:
		return "", "", bad("unknown STORE item")
	}
	flags, kws, err := parseFlagList(args[1:])
	if err != nil {
		return "", "", err
	}
	v := s.sel
	idx, err := v.resolve(set, cmd.uid)
	if err != nil {
		return "", "", err
	}
	if v.readOnly {
		return "", "", no("READ-ONLY", "mailbox is read-only")
	}
	var failed []int
	if conditional {
		s.enableCondStore() // RFC 7162 §3.1: a CONDSTORE enabling command
		if idx, failed, err = s.checkUnchangedSince(idx, unchangedSince); err != nil {
			return "", "", err
		}
	}
	var updates []store.FlagUpdate
	if len(idx) > 0 {
		updates, err = s.srv.st.StoreFlags(s.ctx, v.mb.ID, v.uidSet(idx), op, flags, kws)
		if err != nil {
			return "", "", fmt.Errorf("store flags: %w", err)
		}
		v.dirty = true
	}
	for _, u := range updates {
		if i, ok := v.index(u.UID); ok {
			v.flags[i] = msgFlags{u.Flags, u.Keywords, u.ModSeq}
		}
	}
	if op != store.FlagsRemove && len(updates) > 0 {
		s.announceKeywords(kws) // also for .SILENT: FLAGS lists what the mailbox has
	}
	if spam, ok := junkKeywords(op, kws); ok && len(idx) > 0 {
		s.reportJunk(v.mb.ID, v.uidsOf(idx), spam) // $Junk / $NotJunk teach the account's filter
	}
	switch {
	case !silent:
		for _, i := range idx {
			if v.pending[v.uids[i]] {
				continue
			}
			s.writeFlagsFetch(i, cmd.uid)
		}
	case s.condstore:
		// RFC 7162 §3.1.3: with .SILENT the new MODSEQ of each changed
		// message is still reported.
		for _, u := range updates {
			if i, ok := v.index(u.UID); ok && !v.pending[u.UID] {
				s.w.Raw("* ").Int(int64(i + 1)).Raw(" FETCH (UID ").Number(uint64(u.UID)).
					Raw(" MODSEQ (").Number(u.ModSeq).Raw("))").CRLF()
			}
		}
	}
	if len(failed) > 0 {
		nums := v.uidsOf(failed)
		if !cmd.uid {
			for n, i := range failed {
				nums[n] = uint32(i + 1)
			}
		}
		return "MODIFIED " + imapwire.FormatUIDs(nums), "Conditional STORE failed", nil
	}
	return "", "", nil
}

// cmdExpunge implements EXPUNGE and UID EXPUNGE (RFC 9051 §6.4.3, RFC 4315 §2.1).
func cmdExpunge(s *session, cmd *command) (string, string, error) {
	v := s.sel
	var set store.UIDSet
	if cmd.uid {
		if len(cmd.args) != 1 || cmd.args[0].Kind != imapwire.KindAtom {
			return "", "", bad("UID EXPUNGE needs a UID set")
		}
		ss, err := imapwire.ParseSeqSet(cmd.args[0].Str)
		if err != nil {
			return "", "", bad("invalid UID set")
		}
		idx, err := v.resolve(ss, true)
		if err != nil {
			return "", "", err
		}
		if len(idx) == 0 {
			return "", "", nil
		}
		set = v.uidSet(idx)
	} else if len(cmd.args) != 0 {
		return "", "", bad("EXPUNGE takes no arguments")
	}
	if v.readOnly {
		return "", "", no("READ-ONLY", "mailbox is read-only")
	}
	uids, err := s.srv.st.Expunge(s.ctx, v.mb.ID, set)
	if err != nil {
		return "", "", fmt.Errorf("expunge: %w", err)
	}
	v.dirty = true
	s.expungeNow(uids)
	return "", "", nil
}

// cmdCopy implements COPY, MOVE (RFC 6851) and their UID forms, with
// COPYUID (RFC 4315 §3).
func cmdCopy(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 2 || cmd.args[0].Kind != imapwire.KindAtom {
		return "", "", bad("%s needs a set and a mailbox", cmd.name)
	}
	set, err := imapwire.ParseSeqSet(cmd.args[0].Str)
	if err != nil {
		return "", "", bad("invalid sequence set")
	}
	name, err := s.decodeName(cmd.args[1])
	if err != nil {
		return "", "", err
	}
	v := s.sel
	idx, err := v.resolve(set, cmd.uid)
	if err != nil {
		return "", "", err
	}
	move := cmd.name == "MOVE"
	if move && v.readOnly {
		return "", "", no("READ-ONLY", "mailbox is read-only")
	}
	dst, err := s.srv.st.Mailbox(s.ctx, s.acct.ID, name)
	if err != nil {
		if e := storeErr(err, "mailbox"); e != err {
			return "", "", no("TRYCREATE", "mailbox does not exist")
		}
		return "", "", fmt.Errorf("%s: %w", cmd.name, err)
	}
	if len(idx) == 0 {
		return "", "", nil
	}
	uidset := v.uidSet(idx)
	if !move {
		if err := s.checkCopyQuota(v.mb.ID, uidset); err != nil { // quota.go
			return "", "", err
		}
	}
	var res store.CopyResult
	if move {
		res, err = s.srv.st.Move(s.ctx, v.mb.ID, uidset, dst.ID)
	} else {
		res, err = s.srv.st.Copy(s.ctx, v.mb.ID, uidset, dst.ID)
	}
	if err != nil {
		if e := storeErr(err, "mailbox"); e != err {
			return "", "", e
		}
		return "", "", fmt.Errorf("%s: %w", cmd.name, err)
	}
	if dst.ID == v.mb.ID || move {
		v.dirty = true
	}
	if spam, ok := store.JunkMove(v.mb, dst); ok {
		s.reportJunk(dst.ID, res.DestUIDs, spam) // into or out of Junk teaches the account's filter
	}
	code := ""
	if len(res.SourceUIDs) > 0 {
		code = fmt.Sprintf("COPYUID %d %s %s", res.UIDValidity,
			imapwire.FormatUIDs(res.SourceUIDs), imapwire.FormatUIDs(res.DestUIDs))
	}
	if move {
		// RFC 6851 §4.3: COPYUID goes in an untagged OK before the EXPUNGEs.
		if code != "" {
			s.w.Raw("* OK [").Raw(code).Raw("] Moved").CRLF()
		}
		s.expungeNow(res.SourceUIDs)
		return "", "", nil
	}
	return code, "", nil
}
