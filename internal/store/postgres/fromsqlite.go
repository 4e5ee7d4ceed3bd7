package postgres

// Copying a pimail store from SQLite (a data directory) into PostgreSQL,
// for `pimail migrate`: every identifier an IMAP client or the store
// holds is kept (account, mailbox and blob IDs, UIDVALIDITY, UIDNEXT,
// UIDs, HIGHESTMODSEQ and every message's MODSEQ, expunge tombstones,
// flags and keywords, internal dates), and with them the queue, the
// delivery log and the state beside the mail. A client that synchronised
// against the SQLite store finds the same mailboxes on PostgreSQL and
// resumes (CONDSTORE, QRESYNC, the UIDs it cached) without a full resync.
//
// CopyFromSQLite reads one consistent snapshot of the source (a snapshot
// directory made by store/sqlite's Snapshot, so that the server may keep
// running while it is taken) in one read transaction and writes
// everything in one PostgreSQL transaction into a store that holds no
// domain yet. VerifyCopy then compares the two: the rows of every table,
// every mailbox's counters, every message's UID, MODSEQ, flags,
// keywords, internal date and content address, every tombstone, and the
// SHA-256 of every message's bytes as PostgreSQL stores them. The SQLite
// schema read is the one store/sqlite writes (its Open migrates a data
// directory first).
import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the source's database/sql driver

	"pimail/internal/message"
	"pimail/internal/store"
)

// Counts are the rows of each kind in a store (for `pimail migrate`).
type Counts struct {
	Domains, Accounts, Aliases, Mailboxes, Messages, Blobs, Tombstones int64
	BlobBytes                                                          int64
	Queue, DeliveryLog, SieveScripts, Prefs, Sessions, SpamModels      int64
	Contacts, Identities                                               int64
}

// source is an open snapshot of an SQLite data directory.
type source struct {
	dir string
	db  *sql.DB
	tx  *sql.Tx
}

// openSource opens the snapshot in dir read-only, in one read transaction.
func openSource(ctx context.Context, dir string) (*source, error) {
	db, err := sql.Open("sqlite", filepath.Join(dir, "pimail.db")+"?_pragma=query_only(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	return &source{dir: dir, db: db, tx: tx}, nil
}

func (s *source) close() {
	s.tx.Rollback()
	s.db.Close()
}

// count reads one number.
func (s *source) count(ctx context.Context, q string) (int64, error) {
	var n int64
	err := s.tx.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// liveBlobs is the SQLite condition for a blob something references: its
// refcount also counts expunges not yet applied (blob_release).
const liveBlobs = `(EXISTS (SELECT 1 FROM mail WHERE blob_id = blobs.id) OR EXISTS (SELECT 1 FROM queue WHERE blob_id = blobs.id))`

// SourceCounts counts what Copy would copy from the snapshot in dir.
func SourceCounts(ctx context.Context, dir string) (Counts, error) {
	src, err := openSource(ctx, dir)
	if err != nil {
		return Counts{}, err
	}
	defer src.close()
	return src.counts(ctx)
}

func (s *source) counts(ctx context.Context) (Counts, error) {
	var c Counts
	for _, q := range []struct {
		dst *int64
		sql string
	}{
		{&c.Domains, "SELECT count(*) FROM domains"},
		{&c.Accounts, "SELECT count(*) FROM accounts"},
		{&c.Aliases, "SELECT count(*) FROM aliases"},
		{&c.Mailboxes, "SELECT count(*) FROM mailboxes"},
		{&c.Messages, "SELECT count(*) FROM mail"},
		{&c.Blobs, "SELECT count(*) FROM blobs WHERE " + liveBlobs},
		{&c.BlobBytes, "SELECT coalesce(sum(size), 0) FROM blobs WHERE " + liveBlobs},
		{&c.Tombstones, "SELECT count(*) FROM expunged"},
		{&c.Queue, "SELECT count(*) FROM queue"},
		{&c.DeliveryLog, "SELECT count(*) FROM delivery_rcpt"},
		{&c.SieveScripts, "SELECT count(*) FROM sieve_scripts"},
		{&c.Prefs, "SELECT count(*) FROM prefs"},
		{&c.Sessions, "SELECT count(*) FROM sessions"},
		{&c.SpamModels, "SELECT count(*) FROM spam_models"},
		{&c.Contacts, "SELECT count(*) FROM contacts"},
		{&c.Identities, "SELECT count(*) FROM identities"},
	} {
		n, err := s.count(ctx, q.sql)
		if err != nil {
			return c, fmt.Errorf("count (%s): %w", q.sql, err)
		}
		*q.dst = n
	}
	return c, nil
}

// TargetCounts counts the rows of the PostgreSQL store.
func TargetCounts(ctx context.Context, url string) (Counts, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return Counts{}, err
	}
	defer conn.Close(context.Background())
	var c Counts
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM domains), (SELECT count(*) FROM accounts),
		(SELECT count(*) FROM aliases), (SELECT count(*) FROM mailboxes), (SELECT count(*) FROM mail),
		(SELECT count(*) FROM blobs WHERE refcount > 0), (SELECT coalesce(sum(size), 0)::bigint FROM blobs WHERE refcount > 0),
		(SELECT count(*) FROM expunged), (SELECT count(*) FROM queue), (SELECT count(*) FROM delivery_log),
		(SELECT count(*) FROM sieve_scripts), (SELECT count(*) FROM prefs), (SELECT count(*) FROM sessions),
		(SELECT count(*) FROM spam_models), (SELECT count(*) FROM contacts), (SELECT count(*) FROM identities)`).
		Scan(&c.Domains, &c.Accounts, &c.Aliases, &c.Mailboxes, &c.Messages, &c.Blobs, &c.BlobBytes, &c.Tombstones,
			&c.Queue, &c.DeliveryLog, &c.SieveScripts, &c.Prefs, &c.Sessions, &c.SpamModels, &c.Contacts, &c.Identities)
	return c, err
}

// CheckTarget opens (creating or migrating its schema) the PostgreSQL
// store at url and fails unless it holds no account and no domain.
func CheckTarget(ctx context.Context, url string) error {
	st, err := Open(url, Options{Admin: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer st.Close()
	doms, err := st.Domains(ctx)
	if err != nil {
		return err
	}
	if len(doms) > 0 {
		return fmt.Errorf("the PostgreSQL store is not empty (it has %d domains): migrate only into a new one: %w", len(doms), store.ErrExists)
	}
	return nil
}

// readRaw returns a blob's bytes: its blob_data row, else its file.
func (s *source) readRaw(ctx context.Context, id int64, sha string) ([]byte, error) {
	var raw []byte
	err := s.tx.QueryRowContext(ctx, "SELECT raw FROM blob_data WHERE blob_id = ?", id).Scan(&raw)
	if err == nil {
		return raw, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	raw, err = os.ReadFile(filepath.Join(s.dir, "blobs", sha[:2], sha))
	if err != nil {
		return nil, fmt.Errorf("blob %d: %w", id, err)
	}
	return raw, nil
}

// decodeParsed decodes a stored parse (its JSON).
func decodeParsed(pj []byte) (*message.Parsed, error) {
	p := &message.Parsed{}
	if err := json.Unmarshal(pj, p); err != nil {
		return nil, err
	}
	return p, nil
}

// checkSHA verifies raw against its hex content address.
func checkSHA(raw []byte, hexSHA string) ([]byte, error) {
	sum := sha256.Sum256(raw)
	want, err := hex.DecodeString(hexSHA)
	if err != nil || len(want) != len(sum) {
		return nil, fmt.Errorf("content address %q is not a SHA-256", hexSHA)
	}
	if string(sum[:]) != string(want) {
		return nil, fmt.Errorf("bytes do not hash to their address %s", hexSHA)
	}
	return sum[:], nil
}

// table is one table copied as it is: the SQLite query, the PostgreSQL
// table and columns, and each column's kind: 'i' integer, 't' text, 'b'
// bytea (from text or blob), 'B' boolean (from 0/1), 'n' nullable integer.
type table struct {
	query, name string
	cols        []string
	kinds       string
}

// plainTables are copied row for row, in this order (foreign keys).
var plainTables = []table{
	{"SELECT id, name FROM domains", "domains", []string{"id", "name"}, "it"},
	{`SELECT id, address, domain_id, password_hash, display_name, disabled, created, is_admin, quota_bytes, used_bytes, quota_notice
		FROM accounts`, "accounts", []string{"id", "address", "domain_id", "password_hash", "display_name", "disabled",
		"created", "is_admin", "quota_bytes", "used_bytes", "quota_notice"}, "itittBiBiii"},
	{"SELECT address, target, domain_id FROM aliases", "aliases", []string{"address", "target", "domain_id"}, "tti"},
	{`SELECT id, account_id, name, special_use, uidvalidity, uidnext, highestmodseq, expunged_floor, first_recent_uid FROM mailboxes`,
		"mailboxes", []string{"id", "account_id", "name", "special_use", "uidvalidity", "uidnext", "highestmodseq",
			"expunged_floor", "first_recent_uid"}, "iittiiiii"},
	{"SELECT account_id, name FROM subscriptions", "subscriptions", []string{"account_id", "name"}, "it"},
}

// stateTables come after the blobs and the mail.
var stateTables = []table{
	{"SELECT mailbox_id, uid, modseq, created_modseq, flags, keywords, internal_date, blob_id FROM mail", "mail",
		[]string{"mailbox_id", "uid", "modseq", "created_modseq", "flags", "keywords", "internal_date", "blob_id"}, "iiiiitii"},
	{"SELECT mailbox_id, uid, modseq FROM expunged WHERE mailbox_id IN (SELECT id FROM mailboxes)", "expunged",
		[]string{"mailbox_id", "uid", "modseq"}, "iii"},
	{"SELECT account_id, password_hash, salt, iterations, stored_key, server_key FROM scram", "scram",
		[]string{"account_id", "password_hash", "salt", "iterations", "stored_key", "server_key"}, "itbibb"},
	{"SELECT domain, selector, algorithm, private_key, created FROM dkim_keys", "dkim_keys",
		[]string{"domain", "selector", "algorithm", "private_key", "created"}, "tttbi"},
	{"SELECT id, mail_from, account_id, blob_id, created, next_attempt, attempts, delay_notified FROM queue", "queue",
		[]string{"id", "mail_from", "account_id", "blob_id", "created", "next_attempt", "attempts", "delay_notified"}, "ibiiiiiB"},
	{"SELECT queue_id, idx, address, state, attempts, last_error, last_attempt FROM queue_rcpts", "queue_rcpts",
		[]string{"queue_id", "idx", "address", "state", "attempts", "last_error", "last_attempt"}, "iibiibi"},
	{`SELECT r.id, e.time, e.message_id, e.queue_id, e.direction, e.from_addr, r.to_addr, e.remote_ip, e.subject, r.result, r.reason, r.n
		FROM delivery_rcpt r JOIN delivery_env e ON e.id = r.id >> 10`, "delivery_log",
		[]string{"id", "time", "message_id", "queue_id", "direction", "from_addr", "to_addr", "remote_ip", "subject", "result", "reason", "n"},
		"iitittttttti"},
	{"SELECT account_id, name, content, active, updated FROM sieve_scripts", "sieve_scripts",
		[]string{"account_id", "name", "content", "active", "updated"}, "ittBi"},
	{"SELECT account_id, handle, sender, replied FROM sieve_vacation", "sieve_vacation",
		[]string{"account_id", "handle", "sender", "replied"}, "ibbi"},
	{"SELECT account_id, app, doc, version FROM prefs", "prefs", []string{"account_id", "app", "doc", "version"}, "itbi"},
	{"SELECT app, id, account_id, csrf, created, last_seen, expires, client FROM sessions", "sessions",
		[]string{"app", "id", "account_id", "csrf", "created", "last_seen", "expires", "client"}, "ttitiiib"},
	{"SELECT account_id, data, version FROM spam_models", "spam_models", []string{"account_id", "data", "version"}, "ibi"},
	{"SELECT blob_id, account_id, spam FROM junk_ledger WHERE blob_id IN (SELECT id FROM blobs WHERE " + liveBlobs + ")",
		"junk_ledger", []string{"blob_id", "account_id", "spam"}, "iiB"},
	{"SELECT name, value FROM secrets", "secrets", []string{"name", "value"}, "tb"},
	{"SELECT domain_id, policy FROM mta_sts", "mta_sts", []string{"domain_id", "policy"}, "it"},
	{"SELECT account_id, version FROM address_books", "address_books", []string{"account_id", "version"}, "ii"},
	{"SELECT account_id, href, uid, card, name, emails, categories, version, modified FROM contacts", "contacts",
		[]string{"account_id", "href", "uid", "card", "name", "emails", "categories", "version", "modified"}, "ittbtttii"},
	{"SELECT id, account_id, address, address_lc, name, signature FROM identities", "identities",
		[]string{"id", "account_id", "address", "address_lc", "name", "signature"}, "iitttt"},
	{"SELECT seq, node, at, account, source, success FROM login_events", "login_events",
		[]string{"seq", "node", "at", "account", "source", "success"}, "itibbB"},
}

// identityTables have IDs that the copy set; their sequences move past
// them.
var identityTables = []string{"domains", "accounts", "mailboxes", "blobs", "queue", "delivery_log", "identities"}

// copyTable copies one table with COPY.
func (s *source) copyTable(ctx context.Context, tx pgx.Tx, t table) (int64, error) {
	rows, err := s.tx.QueryContext(ctx, t.query)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", t.name, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(t.kinds))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return 0, fmt.Errorf("read %s: %w", t.name, err)
		}
		for i, k := range t.kinds {
			if vals[i], err = convert(vals[i], byte(k)); err != nil {
				return 0, fmt.Errorf("%s.%s: %w", t.name, t.cols[i], err)
			}
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", t.name, err)
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(out))
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", t.name, err)
	}
	return n, nil
}

// convert turns an SQLite value into the PostgreSQL column's kind.
func convert(v any, kind byte) (any, error) {
	switch kind {
	case 'i', 'n':
		if v == nil && kind == 'n' {
			return nil, nil
		}
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("integer expected, got %T", v)
		}
		return n, nil
	case 'B':
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("0 or 1 expected, got %T", v)
		}
		return n != 0, nil
	case 'b':
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case []byte:
			return x, nil
		case nil:
			return []byte{}, nil
		}
		return nil, fmt.Errorf("bytes expected, got %T", v)
	case 't':
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
		return nil, fmt.Errorf("text expected, got %T", v)
	}
	return nil, fmt.Errorf("unknown column kind %q", kind)
}

// copyBlobs copies every blob a mail row or a queue entry holds, with
// its reference count recounted from them (SQLite's counts the expunges
// it has not applied yet too), checking each message's bytes against
// its content address.
func (s *source) copyBlobs(ctx context.Context, tx pgx.Tx, progress func(done, total int64)) (int64, error) {
	total, err := s.count(ctx, "SELECT count(*) FROM blobs WHERE "+liveBlobs)
	if err != nil {
		return 0, err
	}
	rows, err := s.tx.QueryContext(ctx, `SELECT id, sha256, subject, from_addr, to_addr, cc_addr, bcc_addr, date, date_offset, refs, parsed,
		(SELECT count(*) FROM mail WHERE blob_id = blobs.id) + (SELECT count(*) FROM queue WHERE blob_id = blobs.id)
		FROM blobs WHERE `+liveBlobs+` ORDER BY id`)
	if err != nil {
		return 0, fmt.Errorf("read blobs: %w", err)
	}
	defer rows.Close()
	var (
		b    pgx.Batch
		done int64
	)
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		err := tx.SendBatch(ctx, &b).Close()
		b = pgx.Batch{}
		if progress != nil {
			progress(done, total)
		}
		return err
	}
	for rows.Next() {
		var (
			id, refcount                    int64
			sha, subject, from, to, cc, bcc string
			refs                            string
			date                            sql.NullInt64
			offset                          int64
			pj                              []byte
		)
		if err := rows.Scan(&id, &sha, &subject, &from, &to, &cc, &bcc, &date, &offset, &refs, &pj, &refcount); err != nil {
			return done, fmt.Errorf("read blobs: %w", err)
		}
		raw, err := s.readRaw(ctx, id, sha)
		if err != nil {
			return done, err
		}
		sum, err := checkSHA(raw, sha)
		if err != nil {
			return done, fmt.Errorf("blob %d: %w", id, err)
		}
		p, err := decodeParsed(pj)
		if err != nil {
			return done, fmt.Errorf("blob %d: stored parse: %w", id, err)
		}
		// The decoded fields as SQLite kept them (they are not in the JSON).
		p.Subject, p.From, p.To, p.Cc, p.Bcc = subject, from, to, cc, bcc
		if refs != "" {
			p.References = strings.Split(refs, " ")
		}
		if date.Valid {
			p.Date = time.Unix(date.Int64, 0).In(time.FixedZone("", int(offset)))
		}
		b.Queue("INSERT INTO blobs (id, sha256, size, refcount) VALUES ($1, $2, $3, $4)", id, sum, int64(len(raw)), refcount)
		if err := queueBlobRows(&b, id, &newBlob{sha: sum, raw: raw, parsed: p}); err != nil {
			return done, err
		}
		done++
		if b.Len() >= 400 {
			if err := flush(); err != nil {
				return done, fmt.Errorf("write blobs: %w", err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return done, fmt.Errorf("read blobs: %w", err)
	}
	if err := flush(); err != nil {
		return done, fmt.Errorf("write blobs: %w", err)
	}
	return done, nil
}

// CopyFromSQLite copies the SQLite store of the snapshot directory dir
// into the PostgreSQL store at url, which must hold no domain, in one
// transaction. progress, when not nil, is told of the blobs copied.
func CopyFromSQLite(ctx context.Context, url, dir string, progress func(done, total int64)) error {
	if err := CheckTarget(ctx, url); err != nil {
		return err
	}
	src, err := openSource(ctx, dir)
	if err != nil {
		return err
	}
	defer src.close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	// The copy takes the target whole: no other node writes meanwhile.
	for _, t := range append([]string{"meta"}, identityTables...) {
		if _, err := tx.Exec(ctx, "LOCK TABLE "+t+" IN EXCLUSIVE MODE"); err != nil {
			return err
		}
	}
	rows, err := src.tx.QueryContext(ctx, "SELECT key, value FROM meta WHERE key IN ('directory_version', 'uidvalidity')")
	if err != nil {
		return fmt.Errorf("read meta: %w", err)
	}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE meta SET value = $2 WHERE key = $1", k, v); err != nil {
			rows.Close()
			return err
		}
	}
	rows.Close()
	for _, t := range plainTables {
		if _, err := src.copyTable(ctx, tx, t); err != nil {
			return err
		}
	}
	if _, err := src.copyBlobs(ctx, tx, progress); err != nil {
		return err
	}
	for _, t := range stateTables {
		if _, err := src.copyTable(ctx, tx, t); err != nil {
			return err
		}
	}
	// The sequences move past the IDs SQLite handed out, also those of
	// rows gone before the copy (its counters of schema step 15), so that
	// no MAILBOXID or EMAILID a client has seen names something else.
	floors, err := src.idFloors(ctx)
	if err != nil {
		return err
	}
	for _, t := range identityTables {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SELECT setval(pg_get_serial_sequence('%s', 'id'), greatest(coalesce(max(id), 0), $1) + 1, false) FROM %s", t, t),
			floors[t]); err != nil {
			return fmt.Errorf("move the IDs of %s on: %w", t, err)
		}
	}
	// The failed-login throttle's log goes on after the copied seqs.
	if _, err := tx.Exec(ctx, `INSERT INTO meta (key, value) SELECT 'login_seq', coalesce(max(seq), 0) FROM login_events
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`); err != nil {
		return fmt.Errorf("move the login seqs on: %w", err)
	}
	return tx.Commit(ctx)
}

// comparisons are the queries VerifyCopy runs on both stores: the same
// rows, as text, in the same order.
var comparisons = []struct{ what, sqlite, postgres string }{
	{"mailboxes",
		"SELECT id, account_id, name, special_use, uidvalidity, uidnext, highestmodseq, expunged_floor, first_recent_uid FROM mailboxes ORDER BY id",
		"SELECT id, account_id, name, special_use, uidvalidity, uidnext, highestmodseq, expunged_floor, first_recent_uid FROM mailboxes ORDER BY id"},
	{"subscriptions",
		"SELECT account_id, name FROM subscriptions ORDER BY account_id, name",
		"SELECT account_id, name FROM subscriptions ORDER BY account_id, name"},
	{"messages",
		`SELECT m.mailbox_id, m.uid, m.modseq, m.created_modseq, m.flags, m.keywords, m.internal_date, m.blob_id, b.sha256, b.size
			FROM mail m JOIN blobs b ON b.id = m.blob_id ORDER BY m.mailbox_id, m.uid`,
		`SELECT m.mailbox_id, m.uid, m.modseq, m.created_modseq, m.flags, m.keywords, m.internal_date, m.blob_id, encode(b.sha256, 'hex'), b.size
			FROM mail m JOIN blobs b ON b.id = m.blob_id ORDER BY m.mailbox_id, m.uid`},
	{"expunge tombstones",
		"SELECT mailbox_id, uid, modseq FROM expunged WHERE mailbox_id IN (SELECT id FROM mailboxes) ORDER BY mailbox_id, uid",
		"SELECT mailbox_id, uid, modseq FROM expunged ORDER BY mailbox_id, uid"},
	{"accounts",
		"SELECT id, address, domain_id, password_hash, disabled, is_admin, quota_bytes FROM accounts ORDER BY id",
		"SELECT id, address, domain_id, password_hash, disabled::int, is_admin::int, quota_bytes FROM accounts ORDER BY id"},
	{"queue",
		"SELECT q.id, q.blob_id, q.next_attempt, r.idx, r.address, r.state FROM queue q JOIN queue_rcpts r ON r.queue_id = q.id ORDER BY q.id, r.idx",
		"SELECT q.id, q.blob_id, q.next_attempt, r.idx, convert_from(r.address, 'UTF8'), r.state FROM queue q JOIN queue_rcpts r ON r.queue_id = q.id ORDER BY q.id, r.idx"},
}

// VerifyCopy compares the PostgreSQL store at url with the SQLite
// snapshot in dir (see CopyFromSQLite) and returns the differences found
// (at most 20 of each kind); none means the copy is faithful.
func VerifyCopy(ctx context.Context, url, dir string) ([]string, error) {
	src, err := openSource(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer src.close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	var problems []string
	sc, err := src.counts(ctx)
	if err != nil {
		return nil, err
	}
	tc, err := TargetCounts(ctx, url)
	if err != nil {
		return nil, err
	}
	if sc != tc {
		problems = append(problems, fmt.Sprintf("counts differ: SQLite %+v, PostgreSQL %+v", sc, tc))
	}
	for _, c := range comparisons {
		p, err := compareRows(ctx, src, conn, c.what, c.sqlite, c.postgres)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
	}
	// Every message's bytes as PostgreSQL holds them hash to its address.
	var bad, missing int64
	if err := conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM blobs b JOIN blob_data d ON d.blob_id = b.id WHERE sha256(d.raw) <> b.sha256 OR length(d.raw) <> b.size),
		(SELECT count(*) FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM blob_data d WHERE d.blob_id = b.id)
			OR NOT EXISTS (SELECT 1 FROM blob_meta i WHERE i.blob_id = b.id) OR NOT EXISTS (SELECT 1 FROM blob_text t WHERE t.blob_id = b.id))`).
		Scan(&bad, &missing); err != nil {
		return nil, fmt.Errorf("hash the messages: %w", err)
	}
	if bad > 0 {
		problems = append(problems, fmt.Sprintf("%d messages do not hash to their SHA-256", bad))
	}
	if missing > 0 {
		problems = append(problems, fmt.Sprintf("%d blobs lack their bytes, parse or search text", missing))
	}
	return problems, nil
}

// compareRows runs the two queries and compares their rows as text.
func compareRows(ctx context.Context, src *source, conn *pgx.Conn, what, sq, pq string) ([]string, error) {
	srows, err := src.tx.QueryContext(ctx, sq)
	if err != nil {
		return nil, fmt.Errorf("compare %s: %w", what, err)
	}
	defer srows.Close()
	cols, _ := srows.Columns()
	prows, err := conn.Query(ctx, pq, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("compare %s: %w", what, err)
	}
	defer prows.Close()
	var problems []string
	n := 0
	for {
		sok, pok := srows.Next(), prows.Next()
		if !sok || !pok {
			if sok != pok {
				problems = append(problems, fmt.Sprintf("%s: SQLite has %s rows than PostgreSQL after %d", what, map[bool]string{true: "more", false: "fewer"}[sok], n))
			}
			break
		}
		n++
		vals := make([]any, len(cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := srows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("compare %s: %w", what, err)
		}
		pvals, err := prows.Values()
		if err != nil {
			return nil, fmt.Errorf("compare %s: %w", what, err)
		}
		a, b := rowText(vals), rowText(pvals)
		if a != b && len(problems) < 20 {
			problems = append(problems, fmt.Sprintf("%s: SQLite %s, PostgreSQL %s", what, a, b))
		}
	}
	if err := srows.Err(); err != nil {
		return nil, fmt.Errorf("compare %s: %w", what, err)
	}
	if err := prows.Err(); err != nil {
		return nil, fmt.Errorf("compare %s: %w", what, err)
	}
	return problems, nil
}

// rowText writes a row's values as text, alike for both drivers.
func rowText(vals []any) string {
	var b strings.Builder
	for i, v := range vals {
		if i > 0 {
			b.WriteByte('|')
		}
		switch x := v.(type) {
		case []byte:
			b.Write(x)
		case nil:
		default:
			fmt.Fprint(&b, x)
		}
	}
	return b.String()
}

// idFloors returns, per table, the highest ID SQLite's counters (schema
// step 15, store/sqlite/mailboxes.go) say it handed out; none before that
// step.
func (s *source) idFloors(ctx context.Context) (map[string]int64, error) {
	rows, err := s.tx.QueryContext(ctx, "SELECT key, value FROM meta WHERE key IN ('mailbox_last_id', 'blob_last_id')")
	if err != nil {
		return nil, fmt.Errorf("read the ID counters: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read the ID counters: %w", err)
		}
		out[map[string]string{"mailbox_last_id": "mailboxes", "blob_last_id": "blobs"}[k]] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the ID counters: %w", err)
	}
	return out, nil
}
