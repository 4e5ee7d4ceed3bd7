package store

import (
	"context"
	"time"
)

// The state the programs around the mail keep: preferences, browser
// sessions, spam models, secrets, MTA-STS policies. Older versions kept
// these in files beside the database (internal/upgrade moves them in).

// Preferences are per-account documents of a program serving the user,
// such as the webmail's settings (display name, signature, senders whose
// remote content is loaded): one document per account and program, in a
// format the program owns (JSON). A document is replaced whole, by
// compare-and-swap on its version, so that two writers (two nodes, two
// browser tabs) never lose each other's change unnoticed. Documents are
// removed with their account.
type Preferences interface {
	// Preferences returns the account's document for app and its
	// version; nil and 0 when none is stored (also for an unknown
	// account).
	Preferences(ctx context.Context, accountID int64, app string) (doc []byte, version int64, err error)
	// SetPreferences stores doc when the stored version is still
	// ifVersion (0: none is stored) and returns the new version, which
	// is greater. ErrModified when another write came first (read again
	// and redo the change), ErrNotFound for an unknown account,
	// ErrInvalid for an empty app or a document over MaxPreferencesSize.
	SetPreferences(ctx context.Context, accountID int64, app string, doc []byte, ifVersion int64) (int64, error)
}

// MaxPreferencesSize bounds one preferences document.
const MaxPreferencesSize = 1 << 20

// Session is a logged-in browser of one program (the webmail, the web
// admin). The store keeps what identifies it (ID: the program stores a
// digest of the cookie, so the database holds no usable cookie), the
// CSRF token its forms carry and its lifetime.
type Session struct {
	App       string // the program: "webmail", "admin"
	ID        string
	AccountID int64
	Address   string // the account's address; filled in by Session
	CSRF      string
	Created   time.Time
	LastSeen  time.Time
	Expires   time.Time // the session ends at this instant unless touched
	// Client describes the browser for the user's list of sessions
	// (the program's words, such as "Firefox on Linux, 192.0.2.1");
	// at most 200 bytes, longer is cut.
	Client string
}

// Sessions keeps logged-in browsers, so that a login survives a restart
// and holds on every node. Sessions are removed with their account.
// Times are kept to the millisecond.
type Sessions interface {
	// CreateSession stores s. In the same transaction it removes the
	// sessions of every account that expired before s.Created and, when
	// the account has maxPerAccount or more sessions of s.App, the least
	// recently seen of them, so that s is within the bound (maxPerAccount
	// <= 0: no bound). ErrExists for an ID of s.App that is taken,
	// ErrNotFound for an unknown account, ErrInvalid without App or ID.
	CreateSession(ctx context.Context, s Session, maxPerAccount int) error
	// Session returns the session of app with id that has not expired at
	// now (Expires after now); ErrNotFound otherwise.
	Session(ctx context.Context, app, id string, now time.Time) (Session, error)
	// TouchSession records a use: LastSeen and Expires move forward to
	// the given times (never back). It belongs to the relaxed durability
	// class: a crash may take back the last second of touches. A session
	// that is gone is no error.
	TouchSession(ctx context.Context, app, id string, lastSeen, expires time.Time) error
	// DeleteSession ends a session; one that is gone is no error.
	DeleteSession(ctx context.Context, app, id string) error
	// DeleteAccountSessions ends every session of app of the account
	// except the one with ID keep ("": all).
	DeleteAccountSessions(ctx context.Context, app string, accountID int64, keep string) error
	// AccountSessions lists the account's sessions of app that have not
	// expired at now, most recently seen first.
	AccountSessions(ctx context.Context, app string, accountID int64, now time.Time) ([]Session, error)
}

// JunkTrained is one entry of the junk-training ledger: the account's
// copy of a blob was trained as spam (or ham).
type JunkTrained struct {
	BlobID int64
	Spam   bool
}

// SpamModels keeps the spam classifier's models, in the filter's own
// format (internal/spam), and the junk-training ledger that makes the
// training from users' junk decisions idempotent. Model 0 is the shared
// base model; the others belong to an account and are removed with it.
// Ledger entries are removed with their account and with their blob (a
// blob ID of a removed message may be given to a new one).
type SpamModels interface {
	// SpamModel returns the stored model of the account (0: the base
	// model) and its version; nil and 0 when none is stored.
	SpamModel(ctx context.Context, accountID int64) (data []byte, version int64, err error)
	// SpamModelVersion returns the version alone (0: none stored): cheap,
	// for noticing that another process or node saved the model.
	SpamModelVersion(ctx context.Context, accountID int64) (int64, error)
	// SaveSpamModel replaces the model when its stored version is still
	// ifVersion (0: none is stored) and returns the new version, which is
	// greater; ErrModified when another writer came first. In the same
	// transaction it records trained in the account's junk ledger (an
	// entry for a blob replaces the earlier one).
	SaveSpamModel(ctx context.Context, accountID int64, data []byte, ifVersion int64, trained []JunkTrained) (int64, error)
	// JunkTrained reports how the account's copy of a blob was trained:
	// spam or ham, and ok false when it was not.
	JunkTrained(ctx context.Context, accountID, blobID int64) (spam, ok bool, err error)
}

// Secrets keeps installation-wide secrets that are made once and must
// then never change, such as the key of the Sender Rewriting Scheme.
type Secrets interface {
	// Secret returns the secret stored under name; when there is none,
	// it stores fresh and returns it. Every caller, in every process and
	// on every node, gets the same bytes: the first stored wins.
	// ErrInvalid for an empty name or fresh.
	Secret(ctx context.Context, name string, fresh []byte) ([]byte, error)
}

// MTASTSPolicies keeps the MTA-STS policy (RFC 8461 §3.2) each local domain
// publishes at https://mta-sts.DOMAIN/.well-known/mta-sts.txt. A policy is
// removed with its domain.
type MTASTSPolicies interface {
	// SetMTASTSPolicy stores the domain's policy text; "" removes it.
	// ErrNotFound for a domain that is not local.
	SetMTASTSPolicy(ctx context.Context, domain, policy string) error
	// MTASTSPolicy returns the domain's policy text; ErrNotFound when it
	// has none.
	MTASTSPolicy(ctx context.Context, domain string) (string, error)
}

// LoginEvent is a login internal/auth's throttle counted: a failure, or a
// success that made Source one of the account's own addresses (and
// cleared the failures of the account from it).
type LoginEvent struct {
	Seq     int64     // given by the store (RecordLogins); grows in commit order
	Node    string    // the process that recorded it
	Account string    // the account name tried, which may not exist
	Source  string    // the client's address as counted (an IPv4 address, an IPv6 /64)
	Time    time.Time // kept to the millisecond
	Success bool
}

// MaxLoginEventField bounds each text field of a LoginEvent.
const MaxLoginEventField = 400

// LoginEvents shares the failed-login throttle of internal/auth between
// the nodes on one database and across restarts: each process records
// the logins it counted and folds in those of the others. The events are
// a log, read in Seq order from a cursor, and pruned by age.
type LoginEvents interface {
	// RecordLogins stores evs (their Seq is ignored) in one transaction
	// and gives them Seqs greater than that of every event committed
	// before, so a reader that has read up to Seq n never finds a new
	// event at or below n. It belongs to the relaxed durability class.
	// ErrInvalid for an event without Node or Source, or with a field
	// longer than MaxLoginEventField bytes.
	RecordLogins(ctx context.Context, evs []LoginEvent) error
	// LoginsAfter returns at most limit events with a Seq above after,
	// in Seq order.
	LoginsAfter(ctx context.Context, after int64, limit int) ([]LoginEvent, error)
	// PruneLogins removes the failures from before failedBefore and the
	// successes from before succeededBefore.
	PruneLogins(ctx context.Context, failedBefore, succeededBefore time.Time) error
}

// ValidLoginEvent reports whether ev may be recorded (RecordLogins).
func ValidLoginEvent(ev LoginEvent) bool {
	return ev.Node != "" && ev.Source != "" && len(ev.Node) <= MaxLoginEventField &&
		len(ev.Account) <= MaxLoginEventField && len(ev.Source) <= MaxLoginEventField
}
