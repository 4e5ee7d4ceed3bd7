package store

import (
	"context"
	"time"
)

// SortKey is what sorting and threading a whole mailbox compare of one
// message, from the index.
type SortKey struct {
	UID          uint32
	InternalDate time.Time
	Date         time.Time // the Date: field, zero when absent or unparseable
	Size         int64
	Subject      string   // decoded
	From, To     string   // decoded, "Name <a@b>, c@d" as in ListItem
	MessageID    string   // without <>
	InReplyTo    string   // the In-Reply-To field as in the header
	References   []string // the References ids in order, without <>
}

// ListSorter answers a message list in an order other than the UIDs':
// by date, sender, subject or size, or in threads. The caller orders the
// keys (and keeps the order while the mailbox's message set is unchanged)
// and reads the rows of one page.
type ListSorter interface {
	// SortKeys returns every message of the mailbox in ascending UID
	// order. An unknown mailbox has none; callers check ownership first.
	SortKeys(ctx context.Context, mailboxID int64) ([]SortKey, error)
	// ListItems returns the list rows (as MailboxPage makes them) of the
	// messages with the given UIDs, in ascending UID order; UIDs not in
	// the mailbox are left out.
	ListItems(ctx context.Context, mailboxID int64, uids []uint32) ([]ListItem, error)
}
