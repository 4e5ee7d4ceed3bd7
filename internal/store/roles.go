package store

import (
	"context"
	"io"
	"time"
)

// The role interfaces of the store (see the package doc, "Roles"). Store
// embeds them all; each consumer embeds the ones it calls.

// DirectoryReader reads the directory: domains, accounts (with their
// password hashes) and aliases.
type DirectoryReader interface {
	Domains(ctx context.Context) ([]Domain, error)
	Account(ctx context.Context, address string) (Account, error)
	AccountByID(ctx context.Context, id int64) (Account, error)
	Accounts(ctx context.Context) ([]Account, error)
	Aliases(ctx context.Context) ([]Alias, error)
	// DirectoryVersion is cheap; callers poll it and reload Directory when it moves.
	DirectoryVersion(ctx context.Context) (int64, error)
	Directory(ctx context.Context) (Directory, error)
}

// DirectoryWriter changes the directory. Every change (of a password and
// a quota limit too) changes Directory().Version.
type DirectoryWriter interface {
	AddDomain(ctx context.Context, name string) (Domain, error)
	RemoveDomain(ctx context.Context, name string) error // ErrInvalid while accounts use it
	// AddAccount creates the account and its DefaultMailboxes. The domain
	// must exist (ErrNotFound otherwise).
	AddAccount(ctx context.Context, address, passwordHash string) (Account, error)
	// RemoveAccount deletes the account, its mailboxes and messages, and
	// everything kept for it (preferences, sessions, spam model and junk
	// ledger, SCRAM keys).
	RemoveAccount(ctx context.Context, address string) error
	// AddAlias adds targets to an alias (creating it); the alias domain must exist.
	AddAlias(ctx context.Context, address string, targets []string) error
	RemoveAlias(ctx context.Context, address string) error
	// SetQuota sets the account's storage limit in bytes (see Quotas); 0
	// means unlimited. ErrNotFound for an unknown address, ErrInvalid for
	// a negative size. The limit is part of the directory
	// (Account.QuotaBytes).
	SetQuota(ctx context.Context, address string, bytes int64) error
}

// Credentials are an account's password hash (Account.PasswordHash) and
// the SCRAM credentials (RFC 5802, RFC 7677) kept beside it.
type Credentials interface {
	SetPassword(ctx context.Context, address, passwordHash string) error
	// SetSCRAM stores SCRAM credentials and binds them to the account's
	// current password hash: after SetPassword changes the hash, SCRAM
	// answers ErrNotFound until SetSCRAM is called again, so stale keys
	// never accept an old password.
	SetSCRAM(ctx context.Context, address string, c SCRAMCredentials) error
	// SCRAM returns the SCRAM credentials of an enabled account;
	// ErrNotFound when there are none, or when the password changed since
	// they were set.
	SCRAM(ctx context.Context, address string) (SCRAMCredentials, error)
}

// SigningKeys holds the DKIM signing keys (RFC 6376), per domain and
// selector.
type SigningKeys interface {
	// AddDKIMKey fails with ErrExists when the selector is taken.
	AddDKIMKey(ctx context.Context, k DKIMKey) error
	// DKIMKeys returns the domain's keys, oldest first.
	DKIMKeys(ctx context.Context, domain string) ([]DKIMKey, error)
}

// MailboxReader reads an account's mailboxes and subscriptions.
type MailboxReader interface {
	Mailboxes(ctx context.Context, accountID int64) ([]Mailbox, error)
	// Mailbox finds by name; "INBOX" matches case-insensitively.
	Mailbox(ctx context.Context, accountID int64, name string) (Mailbox, error)
	MailboxStatus(ctx context.Context, accountID int64, name string) (MailboxStatus, error)
	// Subscriptions lists the account's subscribed names in byte order
	// (subscriptions.go).
	Subscriptions(ctx context.Context, accountID int64) ([]string, error)
}

// MailboxWriter creates, deletes, renames and subscribes mailboxes.
type MailboxWriter interface {
	CreateMailbox(ctx context.Context, accountID int64, name, specialUse string) (Mailbox, error)
	// DeleteMailbox removes the mailbox and its messages. INBOX cannot be deleted.
	DeleteMailbox(ctx context.Context, accountID int64, name string) error
	// RenameMailbox renames the mailbox and its children ("a" → "b" moves
	// "a/x" to "b/x"). Renaming INBOX moves its messages into a new mailbox
	// and leaves INBOX empty (RFC 9051 §6.3.6).
	RenameMailbox(ctx context.Context, accountID int64, from, to string) error
	// SetSubscribed subscribes or unsubscribes a name, which need not
	// name a mailbox (subscriptions.go); doing it twice is not an error.
	// ErrInvalid for a name no mailbox could have.
	SetSubscribed(ctx context.Context, accountID int64, name string, subscribed bool) error
}

// MessageReader reads a mailbox's messages from the index.
type MessageReader interface {
	// UIDs lists the mailbox's messages in ascending UID order with their
	// flags and modseq, without parsed content: what SELECT needs.
	UIDs(ctx context.Context, mailboxID int64) ([]MessageMeta, error)
	Fetch(ctx context.Context, mailboxID int64, uids UIDSet, opts FetchOptions) ([]MessageMeta, error)
	// Changes lists what changed after sinceModSeq: new and changed messages
	// and expunged UIDs.
	Changes(ctx context.Context, mailboxID int64, sinceModSeq uint64) (Changes, error)
}

// HeaderReader answers the commonest FETCH of a client listing a mailbox
// (ENVELOPE, or the top-level header; RFC 9051 §6.4.5) from the index, in
// a fraction of what Fetch with Parsed costs: no MIME tree is decoded and
// no message is read. The results are those of Fetch, in ascending UID
// order, and ErrNotFound for an unknown mailbox.
//
// The Buffered variants put the strings and bytes they return into
// buffers the store reuses: the caller calls release (never nil) once it
// is done with them, and nothing may use them afterwards. An
// implementation without such buffers returns a release that does
// nothing.
type HeaderReader interface {
	// FetchEnvelopes is Fetch whose Parsed holds only the envelope (RFC
	// 9051 §7.5.2): Parsed.Body is nil and the decoded search fields are
	// empty.
	FetchEnvelopes(ctx context.Context, mailboxID int64, uids UIDSet) ([]MessageMeta, error)
	FetchEnvelopesBuffered(ctx context.Context, mailboxID int64, uids UIDSet) (metas []MessageMeta, release func(), err error)
	// FetchHeaders is Fetch without Parsed, plus each message's header:
	// the bytes before its body, blank line included (RFC 5322 §2.1);
	// headers[i] belongs to metas[i], and the caller must not change them.
	FetchHeaders(ctx context.Context, mailboxID int64, uids UIDSet) (metas []MessageMeta, headers [][]byte, err error)
	// FetchHeadersBuffered is FetchHeaders that, without withSize, may
	// leave the sizes (MessageMeta.Size) zero.
	FetchHeadersBuffered(ctx context.Context, mailboxID int64, uids UIDSet, withSize bool) (metas []MessageMeta, headers [][]byte, release func(), err error)
}

// BlobReader reads the raw bytes of a message by its blob ID
// (MessageMeta.BlobID, QueueEntry.BlobID).
type BlobReader interface {
	OpenBlob(ctx context.Context, blobID int64) (io.ReadSeekCloser, int64, error)
	ReadBlob(ctx context.Context, blobID int64) ([]byte, error)
}

// ChangeFeed tells listeners that an account's mail changed.
type ChangeFeed interface {
	// Subscribe returns a channel of change events for an account, and a
	// function to stop. Events are coalesced; a slow listener misses none
	// of the fact that something changed, only duplicates. The channel is
	// closed when the store closes.
	Subscribe(accountID int64) (<-chan Event, func())
}

// Mutator changes the messages of a mailbox.
type Mutator interface {
	StoreFlags(ctx context.Context, mailboxID int64, uids UIDSet, op FlagOp, flags Flags, keywords []string) ([]FlagUpdate, error)
	Copy(ctx context.Context, srcMailboxID int64, uids UIDSet, dstMailboxID int64) (CopyResult, error)
	// Move is Copy plus expunge of the sources, in one transaction.
	Move(ctx context.Context, srcMailboxID int64, uids UIDSet, dstMailboxID int64) (CopyResult, error)
	// Expunge removes the messages in uids that have FlagDeleted (all
	// messages with FlagDeleted when uids is empty) and returns their UIDs.
	Expunge(ctx context.Context, mailboxID int64, uids UIDSet) ([]uint32, error)
}

// Appender stores messages a user puts into one of their mailboxes.
type Appender interface {
	// Append stores one message into one mailbox (IMAP APPEND, Sent copies).
	Append(ctx context.Context, mailboxID int64, raw []byte, flags Flags, keywords []string, internalDate time.Time) (Delivered, error)
	// AppendBatch stores several messages into one mailbox in one
	// transaction (IMAP MULTIAPPEND, RFC 3502): all of them or, on any
	// error, none. The results are in the order of msgs.
	AppendBatch(ctx context.Context, mailboxID int64, msgs []AppendMessage) ([]Delivered, error)
}

// Deliverer stores received mail.
type Deliverer interface {
	// Deliver stores one message for many recipients: one blob, one row per
	// recipient, one group commit shared with concurrent deliveries.
	Deliver(ctx context.Context, d Delivery) ([]Delivered, error)
}

// OutboundQueue is the outbound queue. A queued message holds a reference
// to its blob (the same content-addressed blob a local copy uses),
// released when the entry goes away.
type OutboundQueue interface {
	// Enqueue stores raw once and an entry for its recipients (all
	// QueuePending); ID, BlobID, Size and Created are filled in.
	Enqueue(ctx context.Context, e QueueEntry, raw []byte) (QueueEntry, error)
	QueueEntries(ctx context.Context) ([]QueueEntry, error) // all, by ID
	QueueEntry(ctx context.Context, id int64) (QueueEntry, error)
	// ClaimQueue returns up to limit entries due at now (NextAttempt <=
	// now) and, in the same transaction, moves their NextAttempt to
	// now+lease, so that no other worker (or node) takes them meanwhile
	// and a crash mid-delivery makes them due again after the lease.
	ClaimQueue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]QueueEntry, error)
	// UpdateQueueEntry writes NextAttempt, Attempts, DelayNotified and
	// the recipients' State, Attempts, LastError and LastAttempt (matched
	// by position). An entry without pending recipients is removed.
	UpdateQueueEntry(ctx context.Context, e QueueEntry) error
	// RetryQueueEntry makes the entry due at the given time.
	RetryQueueEntry(ctx context.Context, id int64, at time.Time) error
	// DropQueueEntry removes the entry without sending anything.
	DropQueueEntry(ctx context.Context, id int64) error
}

// Statistics counts what is stored, for tests, benchmarks, metrics and
// `pimail status`.
type Statistics interface {
	Stats(ctx context.Context) (Stats, error)
}
