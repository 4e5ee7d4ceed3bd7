// Package store defines pimail's persistent state and the contract every
// implementation of it keeps: the directory (domains, accounts, aliases,
// credentials, signing keys), mailboxes, messages and their
// content-addressed blobs, the outbound queue, the delivery log, and what
// the programs around the mail keep (preferences, sessions, spam models,
// secrets, MTA-STS policies), plus the change feed that wakes sessions
// when a mailbox changes.
//
// The store knows nothing of protocols. Protocol packages (SMTP, IMAP,
// POP3, webmail) call these interfaces and never write SQL. There are two
// implementations behind them: store/sqlite (the embedded default) and
// store/postgres (several nodes on one database); storetest is the suite
// both pass, and it calls every method of every interface below.
//
// # Everything is in the store
//
// All persistent state of an installation lives behind these interfaces,
// so that one transaction model, one backup and one restore cover it, and
// so that several pimail nodes on one database share all of it. What
// lives outside is not state of the installation: the configuration file,
// certificate files the administrator provides (and the ACME account and
// certificate cache, DATA/tls), the journals with which `pimail import`
// resumes an IMAP import it was given on the command line (DATA/import),
// and data derived from the store and rebuilt from it when missing (the
// SQLite full-text index). Packages keep no files of their own beside the
// database; an installation written by an older pimail that did (webmail
// preferences, spam models, the junk ledger, the SRS key, MTA-STS policy
// files) is moved into the store at start by internal/upgrade.
//
// # Roles
//
// The methods are grouped into role interfaces, and each consumer takes
// the roles it calls (as an interface of its own that embeds them, such as
// imapd.Store), never the whole store and never a method outside them:
//
//	DirectoryReader  domains, accounts, aliases; the snapshot of RCPT checks
//	DirectoryWriter  adding and removing them; quota limits
//	Credentials      password hashes and the SCRAM keys beside them
//	AccountAdmin     the disabled and administrator flags
//	SigningKeys      DKIM keys
//	Quotas           usage and quota notices
//	MailboxReader    an account's mailboxes and their counters
//	MailboxWriter    creating, deleting, renaming, subscribing mailboxes
//	MessageReader    UIDs, flags, parsed structure, changes since a MODSEQ
//	HeaderReader     envelopes and headers of a listing (the fast FETCH)
//	BlobReader       the raw message
//	ChangeFeed       events per account
//	Mutator          flags, copy, move, expunge
//	Appender         APPEND, MULTIAPPEND, Sent copies
//	Deliverer        one message to many local mailboxes
//	Searcher         IMAP SEARCH from the index
//	Lister           webmail list pages and folder counters
//	OutboundQueue    the outbound queue
//	DeliveryLog      what happened to each message
//	Statistics       counts for status and metrics
//	Preferences      per-account documents of a program (webmail settings)
//	Sessions         logged-in browsers of the webmail and the web admin
//	LoginEvents      the logins the failed-login throttle counted
//	SpamModels       the classifier's models and the junk-training ledger
//	Secrets          installation-wide keys made once (SRS)
//	MTASTSPolicies   the policy each local domain publishes (RFC 8461)
//	Sieve            users' Sieve scripts and vacation records (RFC 5228)
//	Contacts         each account's address book (vCard cards)
//	Identities       the addresses an account sends as, with signatures
//	ListSorter       a whole mailbox's sort and thread keys; rows by UID
//
// Who takes which:
//
//	auth         DirectoryReader Credentials; LoginEvents (Share)
//	directory    DirectoryReader
//	dkim         SigningKeys
//	delivery     DirectoryReader Quotas MailboxReader Deliverer; Secrets
//	             (LoadSRSSecret); Sieve (WithSieve)
//	managesieve  Sieve
//	queue        OutboundQueue BlobReader
//	submission   DirectoryReader MailboxReader Appender
//	imapd        MailboxReader MailboxWriter MessageReader HeaderReader
//	             BlobReader ChangeFeed Mutator Appender Searcher Quotas
//	pop3d        MailboxReader MessageReader BlobReader Mutator
//	webmail      DirectoryReader Credentials MailboxReader MailboxWriter
//	             MessageReader BlobReader ChangeFeed Mutator Appender
//	             Searcher Lister ListSorter Preferences Sessions Contacts
//	             Identities; some of Sieve (the filter pages)
//	carddavd     Contacts
//	websession   Sessions
//	admin        DirectoryReader DirectoryWriter Credentials AccountAdmin
//	             OutboundQueue BlobReader DeliveryLog Statistics Sessions;
//	             some of Sieve (the scripts' page and reset)
//	spam         SpamModels (filter, junk learner); DirectoryReader
//	             MailboxReader HeaderReader ChangeFeed (sender reputation)
//	mailimport   DirectoryReader MailboxReader MailboxWriter MessageReader
//	             BlobReader Appender
//	mailexport   DirectoryReader MailboxReader MessageReader BlobReader
//	deliverylog  DeliveryLog (LogDelivery, PruneDeliveryLog)
//	metrics      Statistics
//	upgrade      Preferences SpamModels Secrets MTASTSPolicies
//	server       MTASTSPolicies (the policy's HTTP handler)
//
// Store embeds them all; only wiring takes it (internal/server, the
// command line, storetest).
//
// # Durability
//
// Every method that changes data returns only after the change is
// committed and on disk (fsync; for PostgreSQL, a synchronous commit),
// except the relaxed class: Expunge, StoreFlags, TouchSession,
// RecordLogins and PruneLogins, whose loss loses no mail. An implementation may commit those without waiting
// for the disk, so that a power failure can take them back (expunged
// messages reappear, flags revert, a session expires a little earlier)
// until the next durable commit, at most about a second later
// (store/sqlite's doc.go says how). Deliver and Append of concurrent
// callers share one commit (group commit). Each method is one
// transaction: all of its changes are visible together or not at all.
//
// # Concurrency
//
// Every method is safe for concurrent use, from any number of goroutines,
// processes (the server and the command line on one SQLite file) and,
// with a shared database, nodes. Readers never wait for writers. A write
// is visible to every read that starts after it returned, on any node.
// UIDs and MODSEQs of a mailbox are handed out in one order by whichever
// writer comes first: they only grow, never repeat, and UIDVALIDITY
// changes only when a mailbox is created anew (RFC 9051 §2.3.1.1, RFC 7162
// §3.1). Two kinds of writes are made safe across writers by the store
// rather than by a lock in one process:
//
//   - compare-and-swap: SetPreferences, SaveSpamModel and PutContact
//     replace a document only while its version is the one the caller
//     read, and fail with ErrModified otherwise; the caller reads again
//     and redoes its change (the webmail), merges it (the spam filter
//     merges counts) or reports the conflict (CardDAV's 412);
//   - first writer wins: Secret stores a fresh secret only when there is
//     none, and every caller gets the stored one; ClaimQueue, ClaimQuotaNotice
//     and CreateSession decide in one transaction, so two callers never
//     both get the same entry, notice or session ID.
//
// The change feed tells a listener that something changed in a mailbox
// (or the mailbox list of an account); events are coalesced and carry no
// data, so a listener re-reads with Changes. store/sqlite publishes the
// events of its own process; store/postgres also those of the other nodes
// (LISTEN/NOTIFY, or polling), within a second.
//
// # What is cluster-wide
//
// With several nodes on one database, everything in the store is shared
// and consistent: the directory, mail, the queue (claims are leases, so a
// node that dies mid-delivery leaves entries that become due again),
// quotas and their notices, the delivery log, preferences, sessions (a
// browser logged in through one node is logged in on all; logging out or a
// password change ends the session everywhere, on other nodes within the
// second for which internal/websession reuses a session it read), spam
// models and the junk ledger, Sieve scripts and vacation records (a
// vacation reply goes once per sender and period, whichever node
// delivers), address books and identities, secrets and MTA-STS policies,
// the failed-login throttle of internal/auth (each node writes the
// failures it counts, and the successes that clear them or add an
// account's known address, to LoginEvents within half a second, and
// folds the other nodes' into its counters every half second, so an
// attacker who spreads guesses over the nodes is counted as on one,
// within about a second; a restart keeps the count). Each node also
// keeps state of its own, by design: the throttle's decision (each node
// is the atomic gate of its own attempts), caches derived from the store,
// which a node refreshes when the store says they changed (the directory
// view polls DirectoryVersion, spam models are reloaded when
// SpamModelVersion moves, the webmail's caches are keyed by the
// HIGHESTMODSEQ it reads on every page; auth's cache of successful
// password checks is keyed by the stored hash it read, so a password
// change ends it on every node), connection limits, and the count of
// live-update streams per session. Still per node: the cache of remote
// MTA-STS policies (internal/queue; RFC 8461 §5.1 wants it kept across
// restarts too), and the ACME account and certificates (DATA/tls/acme:
// each node orders its own).
//
// # Implementing the state roles
//
// The state roles are defined so that a database without SQLite's single
// writer keeps their meaning with plain SQL (as store/postgres does):
//
//   - a compare-and-swap is an UPDATE … WHERE version = the caller's,
//     version + 1, that must touch one row (else ErrModified), or an INSERT
//     that must not find the row (ifVersion 0): INSERT … ON CONFLICT DO
//     NOTHING and a count of the rows inserted;
//   - Secret is INSERT … ON CONFLICT DO NOTHING followed by a SELECT in the
//     same transaction;
//   - a contact's version comes from a counter per account, incremented
//     (INSERT … ON CONFLICT DO UPDATE) in the transaction that writes or
//     deletes the card, so a version is never given twice in an address
//     book; the UID is unique per account (a unique index);
//   - CreateSession's pruning and bound and its insert are one transaction
//     (the bound may be exceeded by concurrent logins of one account,
//     never by more than their number);
//   - junk ledger entries are recorded only for a blob that exists, in
//     SaveSpamModel's transaction, and deleted with their blob and their
//     account (a foreign key with ON DELETE CASCADE does both where the
//     blob's row is deleted, as the collector does);
//   - RecordLogins's seqs must become visible in their order: SQLite's
//     single writer gives rowids in commit order (AUTOINCREMENT, so a seq
//     is never given twice); PostgreSQL takes them from a counter row
//     whose lock the writer holds until its commit (a sequence hands out
//     numbers that commit out of order, and a reader's cursor would pass
//     an event not yet committed);
//   - times are kept to the millisecond; Session compares Expires with
//     the caller's now, so nodes need clocks within seconds of each other
//     (they do for TLS and DKIM anyway).
//
// # Identifiers and errors
//
// IDs (accounts, mailboxes, blobs, queue entries) are assigned by the
// store. Mailbox, blob and queue IDs are never handed out twice, not
// even after the row with the highest ID is gone (store/sqlite keeps
// counters in meta; PostgreSQL's identity sequences never go back), so
// that clients may keep two of them as names (IMAP's OBJECTID, RFC
// 8474): Mailbox.ID as MAILBOXID, which RenameMailbox keeps (renaming
// INBOX moves its messages into a new mailbox with a new ID, and INBOX
// keeps its own), and MessageMeta.BlobID as EMAILID, which Copy and Move
// keep, as the copies share the blob (RFC 8474 §5.1 asks that of MOVE
// and allows it for COPY and for the same content stored twice).
// storetest's ObjectIDs checks these rules. Errors wrap the sentinel
// values below, tested with errors.Is; any other error is a failure of
// the store itself.
package store
