// Package sqlite is pimail's embedded message store: store.Store on one SQLite
// database (modernc.org/sqlite, pure Go) plus a directory of content-addressed
// message files for the messages too big to keep in the database.
//
// # Data directory
//
//	DIR/pimail.db            the database (WAL mode: also pimail.db-wal, -shm)
//	DIR/blobs/<hh>/<sha256>  message bytes, one file per distinct message
//	                         over Options.InlineMax (128 KiB; smaller ones
//	                         are rows of blob_data in the database),
//	                         <hh> the first two hex digits of the SHA-256
//	DIR/blobs/tmp/           files being written (renamed into place)
//	DIR/backup/              snapshots taken before schema migrations (and
//	                         the files of older versions, internal/upgrade)
//
// # Schema
//
//	meta       (key, value)                  directory_version, uidvalidity counter
//	domains    (id, name)                    name unique, lower case
//	accounts   (id, address, domain_id, password_hash, display_name,
//	            disabled, created)           address unique, lower case
//	aliases    (address, target, domain_id)  one row per target; "@dom" is the catch-all
//	mailboxes  (id, account_id, name, special_use, subscribed,
//	            uidvalidity, uidnext, highestmodseq,
//	            expunged_floor)              unique (account_id, name)
//	blobs      (id, sha256, size, refcount, subject, from_addr, to_addr,
//	            cc_addr, bcc_addr, date, date_offset, message_id,
//	            in_reply_to, refs, parsed)
//	blob_fetch (blob_id, size, sha256, header_size, envelope)   per blob, for
//	                                         IMAP FETCH (compact envelope)
//	blob_addrs (blob_id, subject, from_addr, to_addr, cc_addr, bcc_addr)
//	                                         per blob, lower-cased, for SEARCH
//	blob_headers (blob_id, header)           per blob, for FETCH BODY[HEADER]
//	blob_data  (blob_id, raw)                the message, when not in a file
//	mail       (mailbox_id, uid, modseq, flags, keywords, internal_date,
//	            blob_id, created_modseq)     primary key (mailbox_id, uid);
//	                                         (mailbox_id, modseq) indexed for
//	                                         the rows changed since creation
//	expunged   (mailbox_id, uid, modseq)     tombstones for Changes / QRESYNC
//	scram      (account_id, password_hash, salt, iterations, stored_key,
//	            server_key)                  SCRAM-SHA-256 keys, valid only while
//	                                         password_hash matches the account's
//	dkim_keys  (domain, selector, algorithm, private_key, created)
//	queue      (id, mail_from, account_id, blob_id, created, next_attempt,
//	            attempts, delay_notified)    outbound messages; each holds one
//	                                         reference on its blob
//	queue_rcpts (queue_id, idx, address, state, attempts, last_error,
//	            last_attempt)                per-recipient delivery state
//	delivery_env (id, time, message_id, queue_id, direction, from_addr,
//	            remote_ip, subject)          delivery log: what the entries
//	                                         of one event share
//	delivery_rcpt (id, to_addr, result, reason, n)
//	                                         delivery log: one entry per
//	                                         recipient; id is the entry's,
//	                                         its envelope's id << 10 plus
//	                                         its place in the envelope
//	prefs      (account_id, app, doc, version)
//	                                         a program's settings per account
//	                                         (the webmail's JSON), replaced
//	                                         by compare-and-swap on version
//	sessions   (app, id, account_id, csrf, created, last_seen, expires,
//	            client)                      browser sessions; id is a digest
//	                                         of the cookie (internal/websession)
//	spam_models (account_id, data, version)  spam filter models (0: the base),
//	                                         compare-and-swap like prefs
//	junk_ledger (blob_id, account_id, spam)  blobs trained from junk decisions;
//	                                         deleted with the blob by a trigger
//	secrets    (name, value)                 installation secrets (the SRS key)
//	mta_sts    (domain_id, policy)           MTA-STS policy per local domain
//	address_books (account_id, version)      the counter contacts' versions
//	                                         are taken from (never reused)
//	contacts   (account_id, href, uid, card, name, emails, categories,
//	            version, modified)           address book cards (vCard text)
//	identities (id, account_id, address, address_lc, name, signature)
//	                                         the addresses an account sends as
//
// Everything kept for an account goes with its row (foreign keys with ON
// DELETE CASCADE, a trigger for spam_models, whose base model has no
// account), the MTA-STS policy with its domain.
//
// A blob row describes one distinct message: its size, the decoded header
// fields an index and SEARCH need (as columns), and the JSON of
// message.Parsed (envelope and MIME structure) so that IMAP ENVELOPE and
// BODYSTRUCTURE are answered without re-reading the file. blobs.refcount is
// the number of mail rows (and outbound queue entries) pointing at it, plus
// the pending blob_release rows of expunged ones, which the collector
// subtracts: a message delivered to 15 recipients is one blob row and 15
// mail rows.
//
// Every change to a mailbox takes the next modification sequence of that
// mailbox (mailboxes.highestmodseq + 1): the rows it touches (new mail rows,
// changed flags, expunge tombstones) carry it, so Changes(since) is three
// indexed range scans: the messages created after since (a UID suffix, as
// UIDs and creation MODSEQs grow together), the older ones changed after
// it (the modseq index), and the tombstones. A new message thus writes one
// B-tree entry in its mailbox, not two (schema step 9). UIDNEXT and
// HIGHESTMODSEQ only grow; a mailbox that is deleted and created again
// gets a new UIDVALIDITY (from a counter in meta that is at least the
// current Unix time).
//
// The schema version is PRAGMA user_version. Open applies the missing
// migration steps in one transaction; before it migrates a database that
// already holds data it writes a snapshot with VACUUM INTO to
// DIR/backup/pimail-v<old>-<timestamp>.db.
//
// # Durability and group commit
//
// The database runs in WAL mode with synchronous=FULL, so a committed
// transaction is on disk (except the relaxed class, below). Reads use a pool of read-only connections and
// never wait for the writer. All writes go through one writer goroutine that
// owns the single write connection: it takes every write request that is
// queued, runs them in one BEGIN IMMEDIATE transaction, commits once and
// then answers all callers (group commit). When the previous commit
// carried more than one request, the writer waits up to
// Options.GroupWait (1 ms) for more before it begins, so concurrent
// deliveries share a commit and its fsync. The requests run without
// savepoints (SQLite would copy every page changed under a savepoint into
// a sub-journal first): a request that fails rolls the transaction back
// and gets its error, and the others run again, each in a SAVEPOINT of its
// own this time, so that one failure never affects another request and a
// second costs no third run. SQLITE_BUSY (another process, such as the admin CLI, holding the
// write lock) is retried with back-off for up to Options.BusyTimeout.
// Requests do not pay for copying the WAL into the database file: a
// checkpointer goroutine runs PASSIVE checkpoints on a connection of its own
// once 64 commits are in the WAL and the writer has been quiet for 500 ms,
// or 5 s into a stream of writes, and after 10 minutes without a commit
// whatever the WAL holds; the write connection checkpoints by itself only
// when the WAL reaches 4000 pages (a stream of writes that never lets the
// WAL start over).
//
// A message up to Options.InlineMax goes into blob_data in the same
// transaction as its rows, so the batch's one WAL fsync makes it durable.
// A bigger one is written first, in the caller's goroutine: to
// DIR/blobs/tmp, fsync, rename to its content address, fsync the
// directory. Only then is the request queued; it returns after the commit. A
// crash therefore can leave a file without a row, never a row without its
// bytes, and no acknowledged message is lost.
//
// # Durability classes
//
// Every request that can bring mail in (Deliver, Append, Copy, Move, the
// outbound queue, the directory) is committed with synchronous=FULL: the
// WAL is fsynced before the caller learns of the commit, so SMTP's 250 and
// IMAP's OK come only after the fsync. Expunge, StoreFlags,
// TouchSession and the login log (RecordLogins, PruneLogins) are the
// relaxed class (writeRelaxed): losing them on a
// power failure loses no mail, so the writer commits a batch made only of
// them with synchronous=NORMAL (set outside the transaction, FULL again
// right after), without fsync. In WAL mode the next FULL commit fsyncs the WAL
// file and with it every earlier frame; a FULL batch that follows relaxed
// ones also rewrites a marker row, so that it certainly appends to the WAL
// and syncs. Relaxed commits stay unsynced for at most relaxedSyncDelay (1
// s; then the writer syncs them itself) and at most maxRelaxedJobs (1024)
// requests; Close syncs them. A power failure can therefore take back the
// last second of expunges, flag changes and session touches (messages
// reappear, flags revert, a session expires up to a minute early) and
// nothing else. Two consequences are handled:
//
//   - the collector deletes a file because an expunge brought its reference
//     count to zero; its requests (writeAfterDurable) first sync the relaxed
//     commits, so a file is never deleted while a row that needs it may
//     come back;
//   - modification sequences handed out by lost commits would be handed out
//     again for other changes (RFC 7162 §3.1 forbids it: a CONDSTORE client
//     would miss them). The first relaxed request of a store is committed
//     durably and writes a marker row meta("relaxed:<boot id>:<pid>:<n>"),
//     removed by Close. Open finds markers of an earlier boot only after the
//     machine went down with the store open: it then raises every mailbox's
//     HIGHESTMODSEQ by 2^20 (more than the unsynced requests can have taken)
//     and gives every message that MODSEQ, so CONDSTORE and QRESYNC clients
//     fetch all flags again and see the messages whose expunge was lost.
//     Without a boot id (not Linux) nothing is relaxed.
//
// Files are deleted only by the writer, inside a write transaction, so a
// delivery that relies on an existing file cannot race with the collector:
// the delivery checks, under the same lock, that its file is still there and
// writes it again if not. Expunge and mailbox deletion only delete rows and
// decrement reference counts; a background collector (and Open) removes blob
// rows whose count reached zero together with their files. Files that have
// no row at all (a crash between file write and commit) are removed at Open
// and hourly once they are older than Options.OrphanGrace.
//
// Committed changes are published on an in-process change feed per account
// (Subscribe). Changes made by another process on the same directory (the
// CLI) are not published; the directory version (meta.directory_version,
// one row) is what servers poll for those.
package sqlite
