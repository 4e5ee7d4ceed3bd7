package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// migrations are the schema steps; migrations[i] brings the database from
// version i to i+1 (PRAGMA user_version). Steps are append-only: never edit
// a released step, add a new one.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('directory_version', 1), ('uidvalidity', 0);

CREATE TABLE domains (
	id   INTEGER PRIMARY KEY,
	name TEXT NOT NULL UNIQUE
);

CREATE TABLE accounts (
	id            INTEGER PRIMARY KEY,
	address       TEXT NOT NULL UNIQUE,
	domain_id     INTEGER NOT NULL REFERENCES domains(id),
	password_hash TEXT NOT NULL DEFAULT '',
	display_name  TEXT NOT NULL DEFAULT '',
	disabled      INTEGER NOT NULL DEFAULT 0,
	created       INTEGER NOT NULL
);
CREATE INDEX accounts_domain ON accounts(domain_id);

CREATE TABLE aliases (
	address   TEXT NOT NULL,
	target    TEXT NOT NULL,
	domain_id INTEGER NOT NULL REFERENCES domains(id),
	PRIMARY KEY (address, target)
) WITHOUT ROWID;
CREATE INDEX aliases_domain ON aliases(domain_id);

CREATE TABLE mailboxes (
	id            INTEGER PRIMARY KEY,
	account_id    INTEGER NOT NULL REFERENCES accounts(id),
	name          TEXT NOT NULL,
	special_use   TEXT NOT NULL DEFAULT '',
	subscribed    INTEGER NOT NULL DEFAULT 1,
	uidvalidity   INTEGER NOT NULL,
	uidnext       INTEGER NOT NULL DEFAULT 1,
	highestmodseq INTEGER NOT NULL DEFAULT 1,
	UNIQUE (account_id, name)
);

CREATE TABLE blobs (
	id          INTEGER PRIMARY KEY,
	sha256      TEXT NOT NULL UNIQUE,
	size        INTEGER NOT NULL,
	refcount    INTEGER NOT NULL,
	subject     TEXT NOT NULL DEFAULT '',
	from_addr   TEXT NOT NULL DEFAULT '',
	to_addr     TEXT NOT NULL DEFAULT '',
	cc_addr     TEXT NOT NULL DEFAULT '',
	bcc_addr    TEXT NOT NULL DEFAULT '',
	date        INTEGER,            -- Unix seconds of the Date: field, NULL if none
	date_offset INTEGER NOT NULL DEFAULT 0, -- its zone offset in seconds
	message_id  TEXT NOT NULL DEFAULT '', -- without <>
	in_reply_to TEXT NOT NULL DEFAULT '', -- as in the header
	refs        TEXT NOT NULL DEFAULT '', -- References ids without <>, space separated
	parsed      BLOB NOT NULL           -- message.Parsed as JSON (envelope, MIME tree)
);
CREATE INDEX blobs_refcount0 ON blobs(refcount) WHERE refcount <= 0;
CREATE INDEX blobs_message_id ON blobs(message_id) WHERE message_id <> '';

CREATE TABLE mail (
	mailbox_id    INTEGER NOT NULL REFERENCES mailboxes(id),
	uid           INTEGER NOT NULL,
	modseq        INTEGER NOT NULL,
	flags         INTEGER NOT NULL DEFAULT 0,
	keywords      TEXT NOT NULL DEFAULT '', -- sorted, space separated
	internal_date INTEGER NOT NULL,         -- Unix seconds
	blob_id       INTEGER NOT NULL REFERENCES blobs(id),
	PRIMARY KEY (mailbox_id, uid)
) WITHOUT ROWID;
CREATE INDEX mail_modseq ON mail(mailbox_id, modseq);
CREATE INDEX mail_blob ON mail(blob_id);

CREATE TABLE expunged (
	mailbox_id INTEGER NOT NULL,
	uid        INTEGER NOT NULL,
	modseq     INTEGER NOT NULL,
	PRIMARY KEY (mailbox_id, uid)
) WITHOUT ROWID;
CREATE INDEX expunged_modseq ON expunged(mailbox_id, modseq);
`,
	// 2: SCRAM credentials, DKIM keys and the outbound queue.
	`
CREATE TABLE scram (
	account_id    INTEGER PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
	password_hash TEXT NOT NULL, -- accounts.password_hash the keys belong to
	salt          BLOB NOT NULL,
	iterations    INTEGER NOT NULL,
	stored_key    BLOB NOT NULL,
	server_key    BLOB NOT NULL
);

CREATE TABLE dkim_keys (
	domain      TEXT NOT NULL,
	selector    TEXT NOT NULL,
	algorithm   TEXT NOT NULL,
	private_key BLOB NOT NULL, -- PKCS #8 DER
	created     INTEGER NOT NULL,
	PRIMARY KEY (domain, selector)
) WITHOUT ROWID;

CREATE TABLE queue (
	id             INTEGER PRIMARY KEY,
	mail_from      TEXT NOT NULL,
	account_id     INTEGER NOT NULL DEFAULT 0, -- no foreign key: mail outlives its sender
	blob_id        INTEGER NOT NULL REFERENCES blobs(id),
	created        INTEGER NOT NULL,           -- Unix milliseconds
	next_attempt   INTEGER NOT NULL,           -- Unix milliseconds
	attempts       INTEGER NOT NULL DEFAULT 0,
	delay_notified INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX queue_next_attempt ON queue(next_attempt);

CREATE TABLE queue_rcpts (
	queue_id     INTEGER NOT NULL REFERENCES queue(id) ON DELETE CASCADE,
	idx          INTEGER NOT NULL,
	address      TEXT NOT NULL,
	state        INTEGER NOT NULL DEFAULT 0,
	attempts     INTEGER NOT NULL DEFAULT 0,
	last_error   TEXT NOT NULL DEFAULT '',
	last_attempt INTEGER NOT NULL DEFAULT 0,   -- Unix milliseconds, 0 never
	PRIMARY KEY (queue_id, idx)
) WITHOUT ROWID;
`,
	// 3: the delivery log (deliverylog.go) and the administrator flag (admin.go).
	`
CREATE TABLE delivery_log (
	id         INTEGER PRIMARY KEY,
	time       INTEGER NOT NULL,            -- Unix milliseconds
	message_id TEXT NOT NULL DEFAULT '',    -- without <>
	queue_id   INTEGER NOT NULL DEFAULT 0,
	direction  TEXT NOT NULL,               -- in, out
	from_addr  TEXT NOT NULL DEFAULT '',    -- lower case
	to_addr    TEXT NOT NULL DEFAULT '',    -- lower case
	remote_ip  TEXT NOT NULL DEFAULT '',
	subject    TEXT NOT NULL DEFAULT '',
	result     TEXT NOT NULL,
	reason     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX delivery_log_time ON delivery_log(time);
CREATE INDEX delivery_log_message_id ON delivery_log(message_id);
CREATE INDEX delivery_log_queue_id ON delivery_log(queue_id);
CREATE INDEX delivery_log_from ON delivery_log(from_addr);
CREATE INDEX delivery_log_to ON delivery_log(to_addr);
CREATE INDEX delivery_log_remote_ip ON delivery_log(remote_ip);

ALTER TABLE accounts ADD COLUMN is_admin INTEGER NOT NULL DEFAULT 0;
`,
	// 4: quotas (quota.go, RFC 9208). used_bytes is a counter of the sizes
	// of the account's mail rows, kept by triggers in the transaction that
	// inserts or deletes the row, so that every write path (deliver,
	// append, copy, move, expunge, mailbox and account removal) keeps it
	// and Quota is one primary-key read instead of a join over every
	// message of the account. quota_notice is when the last quota notice
	// was sent (Unix seconds, 0 never).
	`
ALTER TABLE accounts ADD COLUMN quota_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN used_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN quota_notice INTEGER NOT NULL DEFAULT 0;

UPDATE accounts SET used_bytes = coalesce((SELECT sum(b.size)
	FROM mailboxes mb JOIN mail m ON m.mailbox_id = mb.id JOIN blobs b ON b.id = m.blob_id
	WHERE mb.account_id = accounts.id), 0);

CREATE TRIGGER mail_usage_insert AFTER INSERT ON mail BEGIN
	UPDATE accounts SET used_bytes = used_bytes + (SELECT size FROM blobs WHERE id = NEW.blob_id)
	WHERE id = (SELECT account_id FROM mailboxes WHERE id = NEW.mailbox_id);
END;
CREATE TRIGGER mail_usage_delete AFTER DELETE ON mail BEGIN
	UPDATE accounts SET used_bytes = used_bytes - (SELECT size FROM blobs WHERE id = OLD.blob_id)
	WHERE id = (SELECT account_id FROM mailboxes WHERE id = OLD.mailbox_id);
END;
CREATE TRIGGER mail_usage_update AFTER UPDATE OF mailbox_id, blob_id ON mail BEGIN
	UPDATE accounts SET used_bytes = used_bytes - (SELECT size FROM blobs WHERE id = OLD.blob_id)
	WHERE id = (SELECT account_id FROM mailboxes WHERE id = OLD.mailbox_id);
	UPDATE accounts SET used_bytes = used_bytes + (SELECT size FROM blobs WHERE id = NEW.blob_id)
	WHERE id = (SELECT account_id FROM mailboxes WHERE id = NEW.mailbox_id);
END;
`,
	// 5: narrow per-blob tables for the IMAP read paths, so that listing or
	// searching a mailbox reads a few hundred bytes per message instead of
	// the blobs row with its stored parse (fetch_lite.go, search.go):
	// blob_fetch holds what FETCH ENVELOPE and BODY[HEADER] need (the size
	// and content address again, the header size, the compact envelope of fetch_envcodec.go);
	// blob_addrs the header fields SEARCH SUBJECT/FROM/TO/CC/BCC test,
	// lower-cased as store.ContainsFold folds them, so that SQLite's instr
	// decides the RFC 9051 §6.4.4 substring match. Rows are written with
	// the blob (deliver.go) and deleted with it by a trigger. Existing
	// blobs are filled from their stored parse by the functions of
	// fetch_envcodec.go. mailboxes.expunged_floor is the MODSEQ up to
	// which expunge tombstones were pruned (mutate.go).
	`
CREATE TABLE blob_fetch (
	blob_id     INTEGER PRIMARY KEY, -- blobs.id
	size        INTEGER NOT NULL,    -- blobs.size
	sha256      TEXT NOT NULL,       -- blobs.sha256: the file
	header_size INTEGER NOT NULL,    -- bytes before the body, blank line included; -1 unknown
	envelope    BLOB NOT NULL        -- compact envelope (fetch_envcodec.go)
);
CREATE TABLE blob_addrs (
	blob_id   INTEGER PRIMARY KEY,   -- blobs.id
	subject   TEXT NOT NULL,         -- the blobs columns, lower-cased (strings.ToLower)
	from_addr TEXT NOT NULL,
	to_addr   TEXT NOT NULL,
	cc_addr   TEXT NOT NULL,
	bcc_addr  TEXT NOT NULL
);
CREATE TRIGGER blobs_delete_narrow AFTER DELETE ON blobs BEGIN
	DELETE FROM blob_fetch WHERE blob_id = OLD.id;
	DELETE FROM blob_addrs WHERE blob_id = OLD.id;
END;
INSERT INTO blob_fetch (blob_id, size, sha256, header_size, envelope)
	SELECT id, size, sha256, hs, env FROM
		(SELECT id, size, sha256, pimail_header_size(parsed) AS hs, pimail_envelope(parsed) AS env FROM blobs)
	WHERE hs IS NOT NULL AND env IS NOT NULL; -- an undecodable parse: served from blobs
INSERT INTO blob_addrs (blob_id, subject, from_addr, to_addr, cc_addr, bcc_addr)
	SELECT id, pimail_lower(subject), pimail_lower(from_addr), pimail_lower(to_addr),
		pimail_lower(cc_addr), pimail_lower(bcc_addr) FROM blobs;

ALTER TABLE mailboxes ADD COLUMN expunged_floor INTEGER NOT NULL DEFAULT 0;
`,
	// 6: the header of every message (the bytes before its body) in the
	// database, so that FETCH BODY.PEEK[HEADER] of a mailbox reads B-tree
	// pages instead of opening every message file (fetch_lite.go). Written
	// with the blob (deliver.go); blobs older than this step get theirs
	// when their headers are first fetched. Deleted with the blob.
	`
CREATE TABLE blob_headers (
	blob_id INTEGER PRIMARY KEY, -- blobs.id
	header  BLOB NOT NULL
);
DROP TRIGGER blobs_delete_narrow;
CREATE TRIGGER blobs_delete_narrow AFTER DELETE ON blobs BEGIN
	DELETE FROM blob_fetch WHERE blob_id = OLD.id;
	DELETE FROM blob_addrs WHERE blob_id = OLD.id;
	DELETE FROM blob_headers WHERE blob_id = OLD.id;
END;
`,
	// 7: messages up to inlineBlobMax bytes are kept in the database
	// instead of a file of their own (blobs.go): one row written in the
	// group commit, which is fsynced once for the whole batch, instead of
	// a file created, fsynced and renamed, and its directory fsynced, per
	// message. Deleted with the blob.
	`
CREATE TABLE blob_data (
	blob_id INTEGER PRIMARY KEY, -- blobs.id
	raw     BLOB NOT NULL        -- the whole message
);
DROP TRIGGER blobs_delete_narrow;
CREATE TRIGGER blobs_delete_narrow AFTER DELETE ON blobs BEGIN
	DELETE FROM blob_fetch WHERE blob_id = OLD.id;
	DELETE FROM blob_addrs WHERE blob_id = OLD.id;
	DELETE FROM blob_headers WHERE blob_id = OLD.id;
	DELETE FROM blob_data WHERE blob_id = OLD.id;
END;
`,
	// 8: a cheaper EXPUNGE (mutate.go's expungeMail). blob_release holds
	// one row per blob reference an expunge dropped, and the collector
	// subtracts them from blobs.refcount in the background
	// (collect.go's applyReleases) instead of the expunge rewriting one
	// blobs row per message; blobs.refcount counts them until then.
	// usage_hold names the mailboxes whose deleted mail rows the
	// deleting statement accounts for in accounts.used_bytes itself, with
	// one sum over all of them: mail_usage_delete skips their rows
	// instead of running once per row. It is only ever non-empty inside
	// a write transaction.
	`
CREATE TABLE blob_release (
	blob_id INTEGER NOT NULL -- blobs.id, one row per reference to drop
);
CREATE TABLE usage_hold (
	mailbox_id INTEGER PRIMARY KEY
);
DROP TRIGGER mail_usage_delete;
CREATE TRIGGER mail_usage_delete AFTER DELETE ON mail
WHEN NOT EXISTS (SELECT 1 FROM usage_hold WHERE mailbox_id = OLD.mailbox_id) BEGIN
	UPDATE accounts SET used_bytes = used_bytes - (SELECT size FROM blobs WHERE id = OLD.blob_id)
	WHERE id = (SELECT account_id FROM mailboxes WHERE id = OLD.mailbox_id);
END;
`,
	// 9: a new message costs one index entry instead of two. A delivery
	// to N mailboxes wrote two B-tree leaves per mailbox, the primary key
	// of mail and the (mailbox_id, modseq) index, each once in the WAL and
	// again at the checkpoint. mail.created_modseq is the MODSEQ a row was
	// inserted with; the index now holds only the rows whose MODSEQ moved
	// on since (flag changes). Inserts take a mailbox's UIDs and MODSEQs
	// from its counters in one transaction, so that created_modseq never
	// falls as the UID grows, and the messages created after a MODSEQ are
	// a UID suffix of the mailbox, read backwards from the primary key
	// (fetch.go's Changes). Rows from before this step have
	// created_modseq 0: all of them are in the index, and the suffix ends
	// before them.
	`
ALTER TABLE mail ADD COLUMN created_modseq INTEGER NOT NULL DEFAULT 0;
DROP INDEX mail_modseq;
CREATE INDEX mail_modseq ON mail(mailbox_id, modseq) WHERE modseq <> created_modseq;
`,
	// 10: the delivery log in two tables (deliverylog.go). A message to N
	// recipients was N rows that each repeated its time, Message-ID,
	// sender, client IP and subject, with six index entries a row: at 15
	// recipients the log wrote more pages than the message's mailbox rows.
	// delivery_env holds what the recipients of one logged event share,
	// once; delivery_rcpt keeps one narrow row a recipient. A recipient
	// row's id is its envelope's id shifted left by 10 bits plus its
	// place in the envelope, so that an envelope's rows are one range of
	// the primary key and no index joins the two tables (every B-tree a
	// commit touches costs a page, and at a trickle of mail few entries
	// share a commit). The indexes on Message-ID and queue id leave out
	// the empty values that most rows have (mail refused at RCPT, inbound
	// mail). Old rows move over one envelope each, in their order.
	`
CREATE TABLE delivery_env (
	id         INTEGER PRIMARY KEY,
	time       INTEGER NOT NULL,            -- Unix milliseconds
	message_id TEXT NOT NULL DEFAULT '',    -- without <>
	queue_id   INTEGER NOT NULL DEFAULT 0,
	direction  TEXT NOT NULL,               -- in, out
	from_addr  TEXT NOT NULL DEFAULT '',    -- lower case
	remote_ip  TEXT NOT NULL DEFAULT '',
	subject    TEXT NOT NULL DEFAULT ''
);
INSERT INTO delivery_env (id, time, message_id, queue_id, direction, from_addr, remote_ip, subject)
	SELECT id, time, message_id, queue_id, direction, from_addr, remote_ip, subject FROM delivery_log;
CREATE TABLE delivery_rcpt (
	id      INTEGER PRIMARY KEY,            -- delivery_env.id << 10 | place
	to_addr TEXT NOT NULL DEFAULT '',       -- lower case
	result  TEXT NOT NULL,
	reason  TEXT NOT NULL DEFAULT ''
);
INSERT INTO delivery_rcpt (id, to_addr, result, reason) SELECT id << 10, to_addr, result, reason FROM delivery_log;
DROP TABLE delivery_log;
CREATE INDEX delivery_env_time ON delivery_env(time);
CREATE INDEX delivery_env_message_id ON delivery_env(message_id) WHERE message_id <> '';
CREATE INDEX delivery_env_queue_id ON delivery_env(queue_id) WHERE queue_id <> 0;
CREATE INDEX delivery_env_from ON delivery_env(from_addr);
CREATE INDEX delivery_env_remote_ip ON delivery_env(remote_ip);
CREATE INDEX delivery_rcpt_to ON delivery_rcpt(to_addr);
`,
	// 11: Sieve (sieve.go): each account's scripts, at most one of them
	// active (a partial unique index), and the vacation response records
	// (RFC 5230 §4.2), one row per account, handle and sender, whose
	// time says when the last reply went. Both go with the account.
	`
CREATE TABLE sieve_scripts (
	account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	name       TEXT NOT NULL,
	content    TEXT NOT NULL,
	active     INTEGER NOT NULL DEFAULT 0,
	updated    INTEGER NOT NULL, -- Unix milliseconds
	PRIMARY KEY (account_id, name)
) WITHOUT ROWID;
CREATE UNIQUE INDEX sieve_scripts_active ON sieve_scripts(account_id) WHERE active;
CREATE TABLE sieve_vacation (
	account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	handle     TEXT NOT NULL,
	sender     TEXT NOT NULL, -- lower case
	replied    INTEGER NOT NULL, -- Unix milliseconds
	PRIMARY KEY (account_id, handle, sender)
) WITHOUT ROWID;
`,
	// 12: the state that older versions kept in files beside the
	// database (state.go, sessions.go, spammodels.go), so that one
	// transaction model, one backup and one restore cover it and nodes
	// on a shared database can share it; internal/upgrade moves the old
	// files in at start. prefs holds a program's settings document per
	// account (the webmail's JSON) and spam_models the classifier's
	// models (internal/spam's binary format; account 0 is the base
	// model), each replaced by compare-and-swap on its version.
	// junk_ledger remembers which blobs were trained as what, per
	// account; its primary key leads with the blob, so that the trigger
	// that drops an entry with its blob (whose ID SQLite may give to a
	// later blob) is one range of it. sessions are the webmail's and the
	// web admin's logged-in browsers; their ID is a digest of the cookie.
	// Everything of an account goes with the account row (foreign keys,
	// and a trigger for the model, which has none); an MTA-STS policy
	// goes with its domain.
	`
CREATE TABLE prefs (
	account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	app        TEXT NOT NULL,
	doc        BLOB NOT NULL,
	version    INTEGER NOT NULL,
	PRIMARY KEY (account_id, app)
) WITHOUT ROWID;

CREATE TABLE sessions (
	app        TEXT NOT NULL,
	id         TEXT NOT NULL,
	account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	csrf       TEXT NOT NULL,
	created    INTEGER NOT NULL, -- Unix milliseconds
	last_seen  INTEGER NOT NULL, -- Unix milliseconds
	expires    INTEGER NOT NULL, -- Unix milliseconds
	PRIMARY KEY (app, id)
) WITHOUT ROWID;
CREATE INDEX sessions_account ON sessions(account_id, app, last_seen);
CREATE INDEX sessions_expires ON sessions(expires);

CREATE TABLE spam_models (
	account_id INTEGER PRIMARY KEY, -- accounts.id; 0 is the base model
	data       BLOB NOT NULL,
	version    INTEGER NOT NULL
);
CREATE TABLE junk_ledger (
	blob_id    INTEGER NOT NULL,    -- blobs.id
	account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	spam       INTEGER NOT NULL,    -- 1 spam, 0 ham
	PRIMARY KEY (blob_id, account_id)
) WITHOUT ROWID;
CREATE INDEX junk_ledger_account ON junk_ledger(account_id);
CREATE TRIGGER accounts_delete_spam AFTER DELETE ON accounts BEGIN
	DELETE FROM spam_models WHERE account_id = OLD.id;
END;
CREATE TRIGGER blobs_delete_ledger AFTER DELETE ON blobs BEGIN
	DELETE FROM junk_ledger WHERE blob_id = OLD.id;
END;

CREATE TABLE secrets (
	name  TEXT PRIMARY KEY,
	value BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE mta_sts (
	domain_id INTEGER PRIMARY KEY REFERENCES domains(id) ON DELETE CASCADE,
	policy    TEXT NOT NULL
);
`,
	// 13: IMAP subscriptions apart from the mailboxes (subscriptions.go,
	// RFC 3501 §6.3.6): a subscribed name need not exist, and CREATE,
	// DELETE no longer touch them. Mailboxes subscribed before keep their
	// subscription. mailboxes.first_recent_uid is the lowest UID no
	// session has claimed as \Recent (recent.go, RFC 3501 §2.3.2);
	// existing mail is not recent.
	`
CREATE TABLE subscriptions (
	account_id INTEGER NOT NULL REFERENCES accounts(id),
	name       TEXT NOT NULL,
	PRIMARY KEY (account_id, name)
) WITHOUT ROWID;
INSERT INTO subscriptions (account_id, name) SELECT account_id, name FROM mailboxes WHERE subscribed <> 0;
ALTER TABLE mailboxes DROP COLUMN subscribed;
ALTER TABLE mailboxes ADD COLUMN first_recent_uid INTEGER NOT NULL DEFAULT 1;
UPDATE mailboxes SET first_recent_uid = uidnext;
`,
	// 14: the webmail's address books and identities (contacts.go,
	// identities.go), and a description of each session's browser for
	// the user's list of sessions. A card is kept as its writer gave it,
	// with the fields it is listed and searched by (newline-separated
	// lists); address_books holds each account's counter from which every
	// write takes the card's new version, so that a version (CardDAV's
	// ETag) is never given twice, not even to a card deleted and made
	// again. All of it goes with the account.
	`
CREATE TABLE address_books (
	account_id INTEGER PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
	version    INTEGER NOT NULL
);
CREATE TABLE contacts (
	account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	href       TEXT NOT NULL,
	uid        TEXT NOT NULL,
	card       BLOB NOT NULL,
	name       TEXT NOT NULL,
	emails     TEXT NOT NULL, -- newline-separated
	categories TEXT NOT NULL, -- newline-separated
	version    INTEGER NOT NULL,
	modified   INTEGER NOT NULL, -- Unix milliseconds
	PRIMARY KEY (account_id, href)
) WITHOUT ROWID;
CREATE UNIQUE INDEX contacts_uid ON contacts(account_id, uid);

CREATE TABLE identities (
	id         INTEGER PRIMARY KEY,
	account_id INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	address    TEXT NOT NULL,
	address_lc TEXT NOT NULL, -- lower case, for uniqueness
	name       TEXT NOT NULL,
	signature  TEXT NOT NULL
);
CREATE UNIQUE INDEX identities_address ON identities(account_id, address_lc);

ALTER TABLE sessions ADD COLUMN client TEXT NOT NULL DEFAULT '';
`,
	// 15: mailbox and blob IDs never handed out twice (store/doc.go,
	// "Identifiers"; IMAP's MAILBOXID and EMAILID, RFC 8474). A rowid
	// alone is max(id)+1, which gives the ID of a deleted newest row
	// again; counters in meta that only grow name new rows instead. They
	// start at the highest ID in use, so the existing mailboxes and
	// messages keep theirs.
	`
INSERT INTO meta (key, value) VALUES
	('mailbox_last_id', coalesce((SELECT max(id) FROM mailboxes), 0)),
	('blob_last_id', coalesce((SELECT max(id) FROM blobs), 0));
`,
	// 16: the logins the failed-login throttle counted (logins.go,
	// store.LoginEvents), so that a restart keeps the allowance used.
	// AUTOINCREMENT: a seq is never given again, not even after the
	// newest rows were pruned.
	`
CREATE TABLE login_events (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	node    TEXT NOT NULL,
	at      INTEGER NOT NULL, -- Unix milliseconds
	account TEXT NOT NULL,
	source  TEXT NOT NULL,
	success INTEGER NOT NULL
);
CREATE INDEX login_events_at ON login_events(success, at);
`,
	// 17: a delivery log row may stand for several recipients
	// (store.DeliveryLogEntry.Count): the summary of a flood of refusals.
	`
ALTER TABLE delivery_rcpt ADD COLUMN n INTEGER NOT NULL DEFAULT 1;
`,
}

// migrate brings the schema to len(migrations), snapshotting a non-empty
// database first. Several processes may race here: the version is read again
// inside the write transaction, so each step runs once.
func (s *Store) migrate() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout)
	defer cancel()
	want := len(migrations)
	var have int
	if err := retryBusy(ctx, func() error {
		return s.wdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have)
	}); err != nil {
		return fmt.Errorf("sqlite store: read schema version: %w", err)
	}
	if have > want {
		return fmt.Errorf("sqlite store: database schema version %d is newer than this program (%d); upgrade pimail", have, want)
	}
	if have == want {
		return nil
	}
	if have > 0 {
		if err := s.snapshot(ctx, have); err != nil {
			return err
		}
	}
	err := retryBusy(ctx, func() error {
		tx, err := s.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		for ; v < want; v++ {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migration to version %d: %w", v+1, err)
			}
			s.log.Info("schema migrated", "version", v+1)
		}
		// PRAGMA does not take bound parameters; want is an int.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", want)); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return fmt.Errorf("sqlite store: migrate schema %d → %d: %w", have, want, err)
	}
	return nil
}

// snapshot writes a consistent copy of the database at version v to
// DIR/backup/pimail-v<v>-<timestamp>.db before a migration.
func (s *Store) snapshot(ctx context.Context, v int) error {
	bdir := filepath.Join(s.dir, "backup")
	if err := os.MkdirAll(bdir, 0o700); err != nil {
		return fmt.Errorf("sqlite store: create backup directory: %w", err)
	}
	name := filepath.Join(bdir, fmt.Sprintf("pimail-v%d-%s.db", v, time.Now().UTC().Format("20060102T150405.000000000Z")))
	// VACUUM INTO takes a file name literal; quote it as an SQL string.
	q := "VACUUM INTO '" + strings.ReplaceAll(name, "'", "''") + "'"
	if err := retryBusy(ctx, func() error {
		_, err := s.wdb.ExecContext(ctx, q)
		return err
	}); err != nil {
		return fmt.Errorf("sqlite store: snapshot before migration: %w", err)
	}
	if err := syncDir(bdir); err != nil {
		return fmt.Errorf("sqlite store: snapshot before migration: %w", err)
	}
	s.log.Info("database snapshot taken before migration", "path", name, "version", v)
	return nil
}
