// Package postgres is pimail's store on PostgreSQL (driver
// github.com/jackc/pgx/v5): store.Store for several pimail nodes sharing
// one database (docs/deploy.md, docs/scale.md). It passes the same suite
// as store/sqlite (store/storetest) against a real PostgreSQL 15 that the
// tests start themselves (internal/pgtest).
//
// # Schema
//
// Versioned steps (schema.go) in pimail_schema, applied at Open by one
// node at a time (an advisory lock). The tables are store/sqlite's, with
// these differences:
//
//	blobs      (id, sha256 bytea, size, refcount)  narrow: the row a
//	                    delivery of known content updates
//	blob_meta  (blob_id, decoded header fields as bytea and lower-cased
//	            copies, date, refs, parsed JSON, compact envelope,
//	            header bytes, has_attachment)  what FETCH, the list views
//	                    and SEARCH on header fields read
//	blob_data  (blob_id, raw bytea)  every message's bytes (bytea, not
//	                    large objects: docs/benchmarks.md)
//	blob_text  (blob_id, header, body)  store.SearchableText, with GIN
//	                    trigram indexes (pg_trgm)
//	delivery_log        one table (SQLite's is two)
//	login_events        seqs from meta's login_seq row, not a sequence
//	                    (logins.go)
//
// Everything of a blob goes with its row (ON DELETE CASCADE), so the
// collector deletes one row. Text that comes from messages or the network
// is kept as bytea, which holds any byte; names, addresses and keywords
// compare byte by byte (COLLATE "C"), as in SQLite and Go. There are no
// triggers: every statement that adds or removes mail rows changes the
// account's used_bytes itself.
//
// # Durability and group commit
//
// A commit returns once PostgreSQL has flushed it (synchronous_commit as
// the server has it, on by default; with synchronous replication also on
// a standby). Deliver and Append of concurrent callers share
// transactions, a few batches at a time (batch.go). TouchSession, the
// delivery log and the login log commit with synchronous_commit off: a
// crash of the database server can take back their last fraction of a
// second, and nothing else. Expunge and
// StoreFlags are durable here (unlike store/sqlite's relaxed class): a
// MODSEQ handed out by a lost commit would be handed out again.
//
// # Concurrency across nodes
//
// Transactions run at READ COMMITTED. Every write to a mailbox's messages
// first locks the mailbox's row and holds it until the commit, so
// writers of one mailbox on every node take turns, and UIDs and MODSEQs
// are committed in the order they are taken; several mailboxes are
// locked in (account, name) order, then accounts in ID order, so that
// writers never wait for each other in a circle (a deadlock or
// serialization failure, should one happen, reruns the transaction).
// A read of a mailbox is one statement, so it sees one snapshot.
// Compare-and-swap and first-writer-wins (store's doc) are single
// statements with ON CONFLICT; the queue is claimed with FOR UPDATE SKIP
// LOCKED. The change feed reaches other nodes by LISTEN/NOTIFY or by
// polling (feed.go).
//
// # Search
//
// Search compiles the program into one statement: flags, dates, sizes,
// header fields from columns; TEXT and BODY as LIKE on blob_text, which
// the trigram indexes answer and PostgreSQL rechecks, so the result is
// the exact substring match of store.SearchableText, for needles shorter
// than three characters too (by a scan). There is no index to catch up:
// the text is written with the blob.
//
// # Engines without LISTEN/NOTIFY
//
// The schema and the statements stay within what PostgreSQL-compatible
// distributed engines (CockroachDB, YugabyteDB) accept, except the
// advisory lock of the migration and LISTEN/NOTIFY, which Options.Feed
// replaces with polling (docs/scale.md says what was and was not tried).
package postgres
