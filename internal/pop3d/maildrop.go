package pop3d

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"pimail/internal/store"
)

// maildrop is a session's snapshot of the INBOX taken at login (RFC 1939
// §4): message numbers 1..n stay fixed for the session and messages that
// arrive later are not part of it.
type maildrop struct {
	mailboxID   int64
	uidValidity uint32
	msgs        []dropMsg
}

// dropMsg is one message of the snapshot.
type dropMsg struct {
	uid       uint32
	size      int64
	blobID    int64
	deleted   bool // DELE in this session
	retrieved bool // RETR in this session: \Seen is set at QUIT
	seen      bool // already \Seen at login
}

// loadMaildrop takes the snapshot of the account's INBOX.
func loadMaildrop(ctx context.Context, st Store, accountID int64) (*maildrop, error) {
	mb, err := st.Mailbox(ctx, accountID, "INBOX")
	if err != nil {
		return nil, fmt.Errorf("opening INBOX: %w", err)
	}
	metas, err := st.UIDs(ctx, mb.ID)
	if err != nil {
		return nil, fmt.Errorf("listing INBOX: %w", err)
	}
	d := &maildrop{mailboxID: mb.ID, uidValidity: mb.UIDValidity, msgs: make([]dropMsg, 0, len(metas))}
	for _, m := range metas {
		d.msgs = append(d.msgs, dropMsg{
			uid:    m.UID,
			size:   m.Size,
			blobID: m.BlobID,
			seen:   m.Flags&store.FlagSeen != 0,
		})
	}
	return d, nil
}

// errNoSuchMessage is a message number out of range or of a deleted
// message (RFC 1939 §5: a deleted message may not be referred to).
var errNoSuchMessage = errors.New("no such message")

// lookup parses a message number argument and returns the message.
func (d *maildrop) lookup(arg string) (int, *dropMsg, error) {
	n, err := parseNumber(arg)
	if err != nil {
		return 0, nil, err
	}
	if n < 1 || n > len(d.msgs) || d.msgs[n-1].deleted {
		return n, nil, errNoSuchMessage
	}
	return n, &d.msgs[n-1], nil
}

// stat returns the count and total size of the messages not deleted.
func (d *maildrop) stat() (int, int64) {
	var n int
	var size int64
	for _, m := range d.msgs {
		if !m.deleted {
			n++
			size += m.size
		}
	}
	return n, size
}

// reset unmarks all messages marked as deleted (RSET, RFC 1939 §5).
func (d *maildrop) reset() {
	for i := range d.msgs {
		d.msgs[i].deleted = false
	}
}

// uniqueID is the UIDL of a message (RFC 1939 §7): unique in the
// maildrop and persistent across sessions as long as the mailbox keeps
// its UIDVALIDITY. Digits and one dot are within the allowed 0x21–0x7E.
func (d *maildrop) uniqueID(m *dropMsg) string {
	return strconv.FormatUint(uint64(d.uidValidity), 10) + "." + strconv.FormatUint(uint64(m.uid), 10)
}

// commit is the UPDATE state (RFC 1939 §6): it sets \Seen on retrieved
// messages, then flags the deleted ones \Deleted and expunges exactly
// those UIDs. It returns the number of messages removed.
func (d *maildrop) commit(ctx context.Context, st Store) (int, error) {
	var del, seen []uint32
	for _, m := range d.msgs {
		switch {
		case m.deleted:
			del = append(del, m.uid)
		case m.retrieved && !m.seen:
			seen = append(seen, m.uid)
		}
	}
	// An empty UIDSet means "all messages" to the store: never pass one.
	if len(seen) > 0 {
		if _, err := st.StoreFlags(ctx, d.mailboxID, uidSet(seen), store.FlagsAdd, store.FlagSeen, nil); err != nil {
			return 0, fmt.Errorf("marking retrieved messages seen: %w", err)
		}
	}
	if len(del) == 0 {
		return 0, nil
	}
	set := uidSet(del)
	if _, err := st.StoreFlags(ctx, d.mailboxID, set, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		return 0, fmt.Errorf("flagging deleted messages: %w", err)
	}
	removed, err := st.Expunge(ctx, d.mailboxID, set)
	if err != nil {
		return 0, fmt.Errorf("expunging deleted messages: %w", err)
	}
	// Drop the removed messages so that the caller can count the rest.
	kept := d.msgs[:0]
	for _, m := range d.msgs {
		if !m.deleted {
			kept = append(kept, m)
		}
	}
	d.msgs = kept
	return len(removed), nil
}

// uidSet turns ascending UIDs into ranges. uids must not be empty.
func uidSet(uids []uint32) store.UIDSet {
	var set store.UIDSet
	for _, u := range uids {
		if n := len(set); n > 0 && set[n-1].Stop+1 == u {
			set[n-1].Stop = u
			continue
		}
		set = append(set, store.UIDRange{Start: u, Stop: u})
	}
	return set
}

// errBadNumber is an argument that is not a message number or count.
var errBadNumber = errors.New("invalid number")

// parseNumber parses a decimal argument of at most 9 digits (RFC 1939 §3:
// arguments are at most 40 characters; no maildrop holds a billion
// messages).
func parseNumber(s string) (int, error) {
	if s == "" || len(s) > 9 {
		return 0, errBadNumber
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errBadNumber
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}
