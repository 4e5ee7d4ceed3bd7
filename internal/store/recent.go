package store

import "context"

// Recent keeps IMAP4rev1's \Recent flag (RFC 3501 §2.3.2): a message is
// recent in exactly one session, the first to be told of it, and mail
// that arrived while no session had the mailbox selected is recent in
// the next one that selects it. It is one number per mailbox,
// Mailbox.FirstRecentUID: the messages at or above it have not been
// claimed by any session yet (MailboxStatus.Recent counts them).
type Recent interface {
	// ClaimRecent claims the messages of the mailbox from its
	// FirstRecentUID up to upTo for the caller: it returns the
	// FirstRecentUID it found and moves it past upTo, in one transaction,
	// so that concurrent callers never claim the same UID. The caller's
	// recent messages are those with first <= UID <= upTo (none when
	// first > upTo). The claim may reach the disk after ClaimRecent
	// returns (store/sqlite writes it behind): losing it in a crash only
	// makes messages recent once more.
	ClaimRecent(ctx context.Context, mailboxID int64, upTo uint32) (first uint32, err error)
}
