package imapd

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// cmdCreate implements CREATE (RFC 9051 §6.3.4), creating missing
// intermediate levels ("a/b/c" creates "a" and "a/b" too).
func cmdCreate(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) < 1 || len(cmd.args) > 2 {
		return "", "", bad("CREATE needs a mailbox name")
	}
	name, err := s.decodeName(cmd.args[0])
	if err != nil {
		return "", "", err
	}
	if err := validNewName(name); err != nil {
		return "", "", err
	}
	if name == "INBOX" {
		return "", "", no("ALREADYEXISTS", "INBOX always exists")
	}
	use := store.SpecialNone
	if len(cmd.args) == 2 {
		if use, err = parseCreateUse(cmd.args[1]); err != nil {
			return "", "", err
		}
	}
	levels := strings.Split(name, sep)
	for i := 1; i < len(levels); i++ {
		parent := strings.Join(levels[:i], sep)
		if parent == "INBOX" {
			continue
		}
		_, err := s.srv.st.CreateMailbox(s.ctx, s.acct.ID, parent, store.SpecialNone)
		if err != nil && !errors.Is(err, store.ErrExists) {
			return "", "", storeErr(err, "parent mailbox")
		}
	}
	mb, err := s.srv.st.CreateMailbox(s.ctx, s.acct.ID, name, use)
	if err != nil {
		return "", "", storeErr(err, "mailbox")
	}
	return "MAILBOXID (" + mailboxObjectID(mb.ID) + ")", "CREATE completed", nil // RFC 8474 §4.1
}

// parseCreateUse parses the CREATE parameter "(USE (\Archive))" (RFC 6154
// §3). The store keeps one special use per mailbox, of the kinds pimail
// creates; others are refused with USEATTR (§5.3).
func parseCreateUse(a imapwire.Arg) (string, error) {
	if a.Kind != imapwire.KindList || len(a.List) != 2 || a.List[0].Kind != imapwire.KindAtom ||
		upperASCII(a.List[0].Str) != "USE" || a.List[1].Kind != imapwire.KindList {
		return "", bad("invalid CREATE parameters")
	}
	uses := a.List[1].List
	if len(uses) == 0 {
		return store.SpecialNone, nil
	}
	if len(uses) > 1 {
		return "", no("USEATTR", "only one special use per mailbox")
	}
	if uses[0].Kind != imapwire.KindAtom {
		return "", bad("invalid special-use attribute")
	}
	for _, u := range []string{store.SpecialSent, store.SpecialDrafts, store.SpecialTrash, store.SpecialJunk, store.SpecialArchive} {
		if strings.EqualFold(uses[0].Str, u) {
			return u, nil
		}
	}
	return "", no("USEATTR", "unsupported special-use attribute")
}

// cmdDelete implements DELETE (RFC 9051 §6.3.5).
func cmdDelete(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 1 {
		return "", "", bad("DELETE needs a mailbox name")
	}
	name, err := s.decodeName(cmd.args[0])
	if err != nil {
		return "", "", err
	}
	if name == "INBOX" {
		return "", "", no("CANNOT", "INBOX cannot be deleted")
	}
	if s.sel != nil && s.sel.mb.Name == name {
		s.sel = nil
		s.state = stateAuth
	}
	if err := s.srv.st.DeleteMailbox(s.ctx, s.acct.ID, name); err != nil {
		return "", "", storeErr(err, "mailbox")
	}
	return "", "", nil
}

// cmdRename implements RENAME (RFC 9051 §6.3.6).
func cmdRename(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 2 {
		return "", "", bad("RENAME needs two mailbox names")
	}
	from, err := s.decodeName(cmd.args[0])
	if err != nil {
		return "", "", err
	}
	to, err := s.decodeName(cmd.args[1])
	if err != nil {
		return "", "", err
	}
	if err := validNewName(to); err != nil {
		return "", "", err
	}
	if to == "INBOX" {
		return "", "", no("ALREADYEXISTS", "INBOX always exists")
	}
	if err := s.srv.st.RenameMailbox(s.ctx, s.acct.ID, from, to); err != nil {
		return "", "", storeErr(err, "mailbox")
	}
	return "", "", nil
}

// cmdSubscribe implements SUBSCRIBE and UNSUBSCRIBE (RFC 9051 §6.3.7, §6.3.8).
func cmdSubscribe(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 1 {
		return "", "", bad("%s needs a mailbox name", cmd.name)
	}
	name, err := s.decodeName(cmd.args[0])
	if err != nil {
		return "", "", err
	}
	if err := s.srv.st.SetSubscribed(s.ctx, s.acct.ID, name, cmd.name == "SUBSCRIBE"); err != nil {
		return "", "", storeErr(err, "mailbox")
	}
	return "", "", nil
}

// statusItems are the STATUS data items (RFC 9051 §6.3.11, RFC 8438 SIZE,
// RFC 7162 HIGHESTMODSEQ, RFC 8474 MAILBOXID).
var statusItems = map[string]bool{"MESSAGES": true, "UIDNEXT": true, "UIDVALIDITY": true, "UNSEEN": true,
	"DELETED": true, "SIZE": true, "RECENT": true, "HIGHESTMODSEQ": true, "MAILBOXID": true}

func parseStatusItems(a imapwire.Arg) ([]string, error) {
	if a.Kind != imapwire.KindList || len(a.List) == 0 {
		return nil, bad("STATUS needs a list of items")
	}
	var items []string
	for _, it := range a.List {
		n := upperASCII(it.Str)
		if it.Kind != imapwire.KindAtom || !statusItems[n] {
			return nil, bad("unknown STATUS item")
		}
		items = append(items, n)
	}
	return items, nil
}

// cmdStatus implements STATUS (RFC 9051 §6.3.11).
func cmdStatus(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 2 {
		return "", "", bad("STATUS needs a mailbox and a list of items")
	}
	name, err := s.decodeName(cmd.args[0])
	if err != nil {
		return "", "", err
	}
	items, err := parseStatusItems(cmd.args[1])
	if err != nil {
		return "", "", err
	}
	if slices.Contains(items, "HIGHESTMODSEQ") {
		s.enableCondStore() // RFC 7162 §3.1: a CONDSTORE enabling command
	}
	if err := s.writeStatus(name, items); err != nil {
		return "", "", err
	}
	return "", "", nil
}

// writeStatus writes one "* STATUS" response.
func (s *session) writeStatus(name string, items []string) error {
	st, err := s.srv.st.MailboxStatus(s.ctx, s.acct.ID, name)
	if err != nil {
		return storeErr(err, "mailbox")
	}
	return s.writeStatusOf(st, items)
}

// writeStatusOf writes the "* STATUS" response of a mailbox status.
func (s *session) writeStatusOf(st store.MailboxStatus, items []string) error {
	deleted := 0
	for _, it := range items {
		if it == "DELETED" {
			msgs, err := s.srv.st.UIDs(s.ctx, st.ID)
			if err != nil {
				return fmt.Errorf("listing mailbox %d: %w", st.ID, err)
			}
			for _, m := range msgs {
				if m.Flags&store.FlagDeleted != 0 {
					deleted++
				}
			}
		}
	}
	s.w.Raw("* STATUS ")
	s.writeName(st.Name)
	s.w.Raw(" (")
	for i, it := range items {
		if i > 0 {
			s.w.SP()
		}
		s.w.Raw(it).SP()
		switch it {
		case "MESSAGES":
			s.w.Int(int64(st.Messages))
		case "UIDNEXT":
			s.w.Number(uint64(st.UIDNext))
		case "UIDVALIDITY":
			s.w.Number(uint64(st.UIDValidity))
		case "UNSEEN":
			s.w.Int(int64(st.Unseen))
		case "DELETED":
			s.w.Int(int64(deleted))
		case "SIZE":
			s.w.Int(st.Size)
		case "RECENT":
			// The unclaimed messages (recent.go), or this session's own
			// recent ones when it has the mailbox selected.
			n := st.Recent
			if s.sel != nil && s.sel.mb.ID == st.ID {
				n = s.sel.recentCount()
			}
			s.w.Int(int64(n))
		case "HIGHESTMODSEQ":
			s.w.Number(st.HighestModSeq)
		case "MAILBOXID":
			s.w.Raw("(").Raw(mailboxObjectID(st.ID)).Raw(")")
		}
	}
	s.w.Raw(")").CRLF()
	return nil
}
