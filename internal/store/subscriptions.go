package store

import "context"

// Subscriptions are the mailbox names an account subscribed to (RFC 3501
// §6.3.6, RFC 9051 §6.3.7): a list of names kept apart from the mailboxes,
// so that a name may be subscribed before its mailbox exists and stays
// subscribed after the mailbox is deleted (LSUB and LIST-EXTENDED then
// show it, with \NonExistent). Creating or deleting a mailbox changes no
// subscription; renaming one moves the subscriptions of it and its
// children along (as Dovecot does). The special-use mailboxes an account
// is created with (DefaultMailboxes) are subscribed from the start.
// Mailbox.Subscribed says whether a mailbox's name is subscribed.
type Subscriptions interface {
	// SetSubscribed subscribes or unsubscribes a name, which need not
	// name a mailbox; doing it twice is not an error. ErrInvalid for a
	// name no mailbox could have.
	SetSubscribed(ctx context.Context, accountID int64, name string, subscribed bool) error
	// Subscriptions lists the account's subscribed names in byte order.
	Subscriptions(ctx context.Context, accountID int64) ([]string, error)
}
