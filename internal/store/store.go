package store

import (
	"context"
	"errors"
	"time"

	"pimail/internal/message"
)

// Errors returned by implementations; callers test them with errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrExists        = errors.New("already exists")
	ErrInvalid       = errors.New("invalid argument")
	ErrMailboxInUse  = errors.New("mailbox is special-use or has children") // e.g. DELETE INBOX
	ErrModified      = errors.New("modified since")                         // a compare-and-swap lost: read again
	ErrQuotaExceeded = errors.New("quota exceeded")
)

// System flags are kept as a bit set; keywords ($Junk, $Forwarded, …) as strings.
type Flags uint32

const (
	FlagSeen Flags = 1 << iota
	FlagAnswered
	FlagFlagged
	FlagDeleted
	FlagDraft
)

// Special-use attributes (RFC 6154) of the mailboxes created for each account.
const (
	SpecialNone    = ""
	SpecialSent    = `\Sent`
	SpecialDrafts  = `\Drafts`
	SpecialTrash   = `\Trash`
	SpecialJunk    = `\Junk`
	SpecialArchive = `\Archive`
)

// JunkMove says what moving or copying a message from src to dst tells
// the spam filter (RFC 9051 §2.3.2 on $Junk, RFC 6154 \Junk): into Junk is
// spam; out of Junk is ham, unless it goes to the Trash (deleting junk
// says nothing about it). ok is false when the move tells nothing. IMAP
// and the webmail train on it alike.
func JunkMove(src, dst Mailbox) (spam, ok bool) {
	srcJunk := src.SpecialUse == SpecialJunk
	dstJunk := dst.SpecialUse == SpecialJunk
	switch {
	case dstJunk && !srcJunk:
		return true, true
	case srcJunk && !dstJunk && dst.SpecialUse != SpecialTrash:
		return false, true
	}
	return false, false
}

// DefaultMailboxes are created with every account, in this order.
var DefaultMailboxes = []struct{ Name, SpecialUse string }{
	{"INBOX", SpecialNone},
	{"Sent", SpecialSent},
	{"Drafts", SpecialDrafts},
	{"Trash", SpecialTrash},
	{"Junk", SpecialJunk},
	{"Archive", SpecialArchive},
}

// HierarchySeparator separates levels of mailbox names ("Lists/golang").
const HierarchySeparator = "/"

type Domain struct {
	ID   int64
	Name string // lower case, ASCII (A-labels for IDNs)
}

type Account struct {
	ID           int64
	Address      string // lower case local@domain
	DomainID     int64
	PasswordHash string // argon2id PHC string, see internal/password
	DisplayName  string
	Disabled     bool
	Created      time.Time
	QuotaBytes   int64 // storage limit (Quotas); 0 is unlimited
}

// Alias maps one address to targets. Address "@example.com" is the
// catch-all of that domain. Targets are local or remote addresses.
type Alias struct {
	Address string
	Targets []string
}

// Directory is a snapshot of everything recipient validation needs, loaded
// whole into memory by the directory view (small: tens to thousands of rows).
type Directory struct {
	Version  int64 // changes whenever domains, accounts or aliases change
	Domains  []Domain
	Accounts []Account
	Aliases  []Alias
}

type Mailbox struct {
	ID            int64
	AccountID     int64
	Name          string // full name, HierarchySeparator between levels; "INBOX" is case-insensitive
	SpecialUse    string // one of the Special* constants
	Subscribed    bool   // the name is subscribed (Subscriptions)
	UIDValidity   uint32
	UIDNext       uint32
	HighestModSeq uint64
	// FirstRecentUID is the lowest UID no session has claimed as
	// \Recent yet (Recent).
	FirstRecentUID uint32
}

// MailboxStatus is a mailbox plus its counters.
type MailboxStatus struct {
	Mailbox
	Messages int
	Unseen   int
	Size     int64 // sum of message sizes
	Recent   int   // messages at or above FirstRecentUID (Recent)
}

// MessageMeta is one message in one mailbox, as answered from the index.
type MessageMeta struct {
	MailboxID    int64
	UID          uint32
	ModSeq       uint64
	Flags        Flags
	Keywords     []string // sorted, case preserved
	InternalDate time.Time
	Size         int64
	BlobID       int64
	// Parsed is filled only when asked for (FetchOptions.Parsed).
	Parsed *message.Parsed
}

// FetchOptions say which parts of MessageMeta a fetch needs.
type FetchOptions struct {
	Parsed bool // envelope, MIME structure and searchable header fields
}

// UIDRange is a closed range of UIDs; Stop 0 means "to the highest UID".
type UIDRange struct{ Start, Stop uint32 }

// UIDSet is a set of UID ranges; nil or empty means "all messages".
type UIDSet []UIDRange

// Contains reports whether uid is in the set (an empty set contains all).
func (s UIDSet) Contains(uid uint32) bool {
	if len(s) == 0 {
		return true
	}
	for _, r := range s {
		if uid >= r.Start && (r.Stop == 0 || uid <= r.Stop) {
			return true
		}
	}
	return false
}

// FlagOp says how StoreFlags combines the given flags with the current ones.
type FlagOp int

const (
	FlagsAdd FlagOp = iota
	FlagsRemove
	FlagsReplace
)

// FlagUpdate is one message whose flags changed.
type FlagUpdate struct {
	UID      uint32
	ModSeq   uint64
	Flags    Flags
	Keywords []string
}

// CopyResult maps source UIDs to the new UIDs in the destination (UIDPLUS).
type CopyResult struct {
	UIDValidity uint32
	SourceUIDs  []uint32
	DestUIDs    []uint32
}

// Changes is what happened in a mailbox after a given MODSEQ.
type Changes struct {
	HighestModSeq uint64
	UIDNext       uint32
	Updated       []MessageMeta // new or changed messages, ascending UID, without Parsed
	Expunged      []uint32      // ascending
}

// Recipient is one mailbox a delivery writes to.
type Recipient struct {
	AccountID int64
	Mailbox   string // mailbox name; "" means INBOX. Created if missing.
	Flags     Flags
	Keywords  []string
}

// Delivery is one message for one or more local mailboxes. Raw is the
// complete message as it will be stored (trace headers already prepended).
type Delivery struct {
	Raw          []byte
	Parsed       *message.Parsed // optional; computed by the store when nil
	InternalDate time.Time       // zero means now
	Recipients   []Recipient
}

// AppendMessage is one message of an AppendBatch.
type AppendMessage struct {
	Raw          []byte
	Flags        Flags
	Keywords     []string
	InternalDate time.Time // zero means now
}

// Delivered says where one recipient's copy went.
type Delivered struct {
	AccountID   int64
	MailboxID   int64
	UIDValidity uint32
	UID         uint32
}

// Event is a change-feed notification: something in the mailbox changed
// (new messages, flags, expunges) or the mailbox list of the account changed
// (MailboxID 0). Listeners re-read what they need with Changes.
type Event struct {
	AccountID int64
	MailboxID int64
}

// Store is the whole persistent state of a pimail installation: every
// role (package doc, "Roles"). Only wiring takes it whole; a consumer
// takes the roles it calls.
type Store interface {
	DirectoryReader
	DirectoryWriter
	Credentials
	AccountAdmin
	SigningKeys
	Quotas
	MailboxReader
	MailboxWriter
	Recent
	MessageReader
	HeaderReader
	BlobReader
	ChangeFeed
	Mutator
	Appender
	Deliverer
	Searcher
	Lister
	OutboundQueue
	DeliveryLog
	Statistics
	Preferences
	Sessions
	LoginEvents
	SpamModels
	Secrets
	MTASTSPolicies
	Contacts
	Identities
	ListSorter
	Sieve

	Close() error
}

// SCRAMCredentials are what a SCRAM server keeps per user (RFC 5802 §3):
// the salt and iteration count of the salted password, and
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key"). SHA-256 (RFC 7677).
type SCRAMCredentials struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// DKIM key algorithms (the k= tag, RFC 6376 §3.6.1, RFC 8463).
const (
	DKIMRSA     = "rsa"
	DKIMEd25519 = "ed25519"
)

// DKIMKey is one signing key of a domain.
type DKIMKey struct {
	Domain     string // lower case, A-labels
	Selector   string
	Algorithm  string // DKIMRSA or DKIMEd25519
	PrivateKey []byte // PKCS #8, DER
	Created    time.Time
}

// QueueState is where one recipient of a queued message stands.
type QueueState int

const (
	QueuePending   QueueState = iota // not delivered yet; will be retried
	QueueDelivered                   // accepted by the remote server
	QueueFailed                      // permanently failed (a DSN was or will be sent)
)

func (s QueueState) String() string {
	switch s {
	case QueuePending:
		return "pending"
	case QueueDelivered:
		return "delivered"
	case QueueFailed:
		return "failed"
	}
	return "unknown"
}

// QueueRecipient is one envelope recipient of a queued message.
type QueueRecipient struct {
	Address     string
	State       QueueState
	Attempts    int
	LastError   string // the last reply or local error, for the DSN and `queue show`
	LastAttempt time.Time
}

// QueueEntry is one message waiting in the outbound queue.
type QueueEntry struct {
	ID            int64
	MailFrom      string // reverse-path; "" is the null sender of a bounce
	AccountID     int64  // submitting account; 0 for bounces and forwarding
	BlobID        int64
	Size          int64
	Created       time.Time
	NextAttempt   time.Time
	Attempts      int  // delivery attempts made for the entry
	DelayNotified bool // a delayed-delivery notice has been sent
	Recipients    []QueueRecipient
}

// Stats counts what is stored.
type Stats struct {
	Blobs     int64
	BlobBytes int64
	Messages  int64 // mailbox rows
	Accounts  int64
}

// ---- Search (protocol-neutral IMAP SEARCH semantics, RFC 9051 §6.4.4) ----
//
// Searcher answers a search program from the
// index (header columns, flags, dates, sizes) and the full-text index,
// never by reading every message.
type Searcher interface {
	// Search returns the messages of the mailbox that match q, in
	// ascending UID order. Matching follows SearchableText for TEXT and BODY
	// and is a case-insensitive substring match everywhere (RFC 9051
	// §6.4.4); results are exact, also for messages delivered a moment
	// ago that the full-text index has not seen yet.
	Search(ctx context.Context, mailboxID int64, q SearchQuery) (SearchResult, error)
}

// SearchOp is the kind of a SearchQuery node.
type SearchOp int

const (
	SearchAll        SearchOp = iota // every message
	SearchAnd                        // all Children match (none: every message)
	SearchOr                         // at least one of Children matches
	SearchNot                        // Children[0] does not match
	SearchUIDs                       // UID in UIDs; an empty UIDs matches nothing
	SearchFlag                       // every flag in Flags is set
	SearchKeyword                    // Keyword is set (case-insensitive)
	SearchModSeq                     // MODSEQ >= Num (RFC 7162 §3.1.5)
	SearchLarger                     // size > Num
	SearchSmaller                    // size < Num
	SearchBefore                     // internal date's day < Date's day
	SearchOn                         // internal date's day == Date's day
	SearchSince                      // internal date's day >= Date's day
	SearchSentBefore                 // Date: field's day (in its own zone) < Date's day; INTERNALDATE when missing
	SearchSentOn                     // … == Date's day
	SearchSentSince                  // … >= Date's day
	SearchSubject                    // decoded Subject contains Text
	SearchFrom                       // decoded From addresses contain Text
	SearchTo                         // … To
	SearchCc                         // … Cc
	SearchBcc                        // … Bcc
	SearchHeader                     // a top-level field named Field whose decoded value contains Text ("" = present)
	SearchBody                       // SearchableText body contains Text
	SearchText                       // SearchableText header or body contains Text
	SearchBlobID                     // BlobID == Num (IMAP's EMAILID, RFC 8474 §6)
)

// SearchQuery is one node of a search program. Internal dates are compared
// as calendar days in the server's local time zone (time.Local); Date is a
// calendar date whose time and zone are ignored.
type SearchQuery struct {
	Op       SearchOp
	Children []SearchQuery
	UIDs     UIDSet
	Flags    Flags
	Keyword  string
	Field    string // SearchHeader
	Text     string
	Date     time.Time
	Num      int64
}

// SearchResult lists the matching messages; ModSeqs[i] is the MODSEQ of UIDs[i].
type SearchResult struct {
	UIDs    []uint32
	ModSeqs []uint64
}

// ---- List views (webmail): a page of a mailbox and the folder counters ----
//
// Lister answers what a message list shows straight from the index, in one
// indexed query each: no decoding of the stored MIME structure and no read
// of a whole mailbox to find one page.
type Lister interface {
	// MailboxPage returns up to limit messages of the mailbox, highest UID
	// (newest) first, after skipping the offset newest ones. An unknown
	// mailbox has no messages; callers check ownership first.
	MailboxPage(ctx context.Context, mailboxID int64, offset, limit int) ([]ListItem, error)
	// MailboxCounts returns every mailbox of the account, ordered by name,
	// with its number of messages and of unseen messages.
	MailboxCounts(ctx context.Context, accountID int64) ([]MailboxCount, error)
}

// ListItem is one row of a message list.
type ListItem struct {
	UID           uint32
	Flags         Flags
	Keywords      []string
	InternalDate  time.Time
	Size          int64
	Subject       string    // decoded
	From, To      string    // decoded, "Name <a@b>, c@d" as in message.Parsed
	Date          time.Time // the Date: field, zero when absent or unparseable
	HasAttachment bool      // some part is an attachment (message.Part.IsAttachment)
}

// MailboxCount is a mailbox with its counters.
type MailboxCount struct {
	Mailbox
	Messages int
	Unseen   int
}

// ---- Delivery log: what happened to each message, for the web admin ----
//
// Every accepted, filed-as-junk, rejected, delivered, deferred and bounced
// message or recipient leaves one row, written in batches (internal/
// deliverylog buffers and never blocks mail). Rows are pruned by age.

// DeliveryDirection says whether mail came in or went out.
type DeliveryDirection string

const (
	DirectionIn  DeliveryDirection = "in"  // received by smtpd or submission
	DirectionOut DeliveryDirection = "out" // the outbound queue
)

// DeliveryResult is what happened to a message for one recipient.
type DeliveryResult string

const (
	ResultAccepted  DeliveryResult = "accepted"  // stored in a local mailbox, or queued
	ResultJunk      DeliveryResult = "junk"      // stored, filed into Junk
	ResultRejected  DeliveryResult = "rejected"  // refused during the SMTP transaction
	ResultDelivered DeliveryResult = "delivered" // accepted by the remote server
	ResultDeferred  DeliveryResult = "deferred"  // temporary failure, will be retried
	ResultBounced   DeliveryResult = "bounced"   // permanent failure, DSN sent
)

// DeliveryLogEntry is one row of the delivery log. Every string field may
// come from the network: show it escaped.
type DeliveryLogEntry struct {
	ID        int64 // assigned by the store; ascending with insertion
	Time      time.Time
	MessageID string // Message-ID without <>; "" when unknown (e.g. rejected at RCPT)
	QueueID   int64  // outbound queue entry; 0 for inbound mail
	Direction DeliveryDirection
	From      string // envelope sender; "" is the null sender
	To        string // envelope recipient
	RemoteIP  string // SMTP client (in) or remote server (out)
	Subject   string // decoded, when known
	Result    DeliveryResult
	Reason    string // the SMTP reply, filter verdict or error
	// Count is how many recipients the entry stands for: 0 and 1 mean
	// itself; more is a summary of refusals that were not logged one by
	// one (internal/deliverylog's limit on floods).
	Count int
}

// DeliveryLogQuery selects log rows, newest first. Text matches a whole
// message id (with or without <>), an address (sender or recipient), a
// domain written "@example.org", a queue id (digits) or a remote IP; empty
// Text matches all. Zero Since or Until are open ends; Before > 0 returns
// only rows with ID < Before (the cursor of the next page).
type DeliveryLogQuery struct {
	Text   string
	Result DeliveryResult // "" matches every result
	Since  time.Time
	Until  time.Time
	Limit  int // 0 means 100; at most 1000
	Before int64
}

// DeliveryLogCount is the number of recipients logged in one minute,
// direction and result (a summary entry counts its Count).
type DeliveryLogCount struct {
	Minute    time.Time // start of the minute
	Direction DeliveryDirection
	Result    DeliveryResult
	Count     int
}

// DeliveryLog stores and searches the delivery log.
type DeliveryLog interface {
	// LogDelivery appends entries in one write (shared group commit);
	// zero Time means now. The entries' ID fields are ignored.
	LogDelivery(ctx context.Context, entries []DeliveryLogEntry) error
	SearchDeliveryLog(ctx context.Context, q DeliveryLogQuery) ([]DeliveryLogEntry, error)
	// DeliveryLogCounts counts rows at or after since, per minute,
	// direction and result, oldest minute first.
	DeliveryLogCounts(ctx context.Context, since time.Time) ([]DeliveryLogCount, error)
	// PruneDeliveryLog deletes rows older than before and returns how many.
	PruneDeliveryLog(ctx context.Context, before time.Time) (int64, error)
}

// AccountAdmin holds account flags that only the web admin changes.
//
// Who is an administrator: every account flagged admin; while no account
// is flagged, the oldest account (lowest ID, normally the one quickstart
// created) is. SetAdmin(…, true) on such an installation flags that oldest
// account too, so it keeps its rights.
type AccountAdmin interface {
	// SetAccountDisabled disables (no login, no mail accepted) or enables
	// an account; ErrNotFound for an unknown address.
	SetAccountDisabled(ctx context.Context, address string, disabled bool) error
	// SetAdmin flags or unflags an account as administrator. Unflagging
	// the last flagged administrator fails with ErrInvalid.
	SetAdmin(ctx context.Context, address string, admin bool) error
	// IsAdmin reports whether the account is an administrator (see above).
	IsAdmin(ctx context.Context, accountID int64) (bool, error)
	// Admins lists the administrators' addresses, sorted.
	Admins(ctx context.Context) ([]string, error)
}

// ---- Quotas: a storage limit per account (RFC 9208) ----
//
// An account's usage is the sum of the sizes of all its messages, each
// mail row counted (a message in two mailboxes counts twice), which is the
// STORAGE resource of RFC 9208 §5.1 and the sum of the mailboxes' STATUS
// SIZE. Limits are soft: the store never refuses a write for quota; the
// callers (delivery, IMAP APPEND) check before writing, so that notices and
// moves are never lost.

// QuotaNoticeInterval is how often at most an account is sent a notice
// about its quota.
const QuotaNoticeInterval = 24 * time.Hour

// Quotas answers the usage (the limits are set with
// DirectoryWriter.SetQuota).
type Quotas interface {
	// Quota returns the account's limit (0: unlimited) and its usage in
	// bytes; ErrNotFound for an unknown account. It is one indexed read.
	Quota(ctx context.Context, accountID int64) (limit, used int64, err error)
	// ClaimQuotaNotice reports whether a quota notice may be sent to the
	// account now: true when none was claimed in the QuotaNoticeInterval
	// before now, and then now is recorded in the same transaction, so
	// concurrent callers get true once.
	ClaimQuotaNotice(ctx context.Context, accountID int64, now time.Time) (bool, error)
}
