package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// readTx opens a read transaction and checks that the mailbox exists, so
// that a missing mailbox is ErrNotFound rather than an empty list. The
// queries of more are prepared for the transaction (readStmts).
func (s *Store) readTx(ctx context.Context, mailboxID int64, more ...*stmtRef) (*sql.Tx, store.Mailbox, error) {
	mbq := &stmtRef{q: "SELECT " + mailboxCols + " FROM mailboxes WHERE id = ?"}
	refs := append([]*stmtRef{mbq}, more...)
	if err := s.readStmts(refs); err != nil {
		return nil, store.Mailbox{}, err
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, store.Mailbox{}, fmt.Errorf("sqlite store: begin read: %w", err)
	}
	for _, r := range refs {
		r.st = tx.StmtContext(s.ctx, r.st)
	}
	m, err := scanMailbox(mbq.st.QueryRowContext(ctx, mailboxID))
	if err != nil {
		tx.Rollback()
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.Mailbox{}, fmt.Errorf("mailbox %d: %w", mailboxID, store.ErrNotFound)
		}
		return nil, store.Mailbox{}, fmt.Errorf("sqlite store: mailbox %d: %w", mailboxID, err)
	}
	return tx, m, nil
}

const metaCols = "mail.uid, mail.modseq, mail.flags, mail.keywords, mail.internal_date, mail.blob_id, b.size"

const parsedCols = ", b.subject, b.from_addr, b.to_addr, b.cc_addr, b.bcc_addr, b.date, b.date_offset, b.refs, b.parsed"

// scanMeta reads one row of metaCols (and parsedCols when withParsed).
func scanMeta(rows *sql.Rows, mailboxID int64, withParsed bool) (store.MessageMeta, error) {
	var m store.MessageMeta
	var kws string
	var idate int64
	dest := []any{&m.UID, &m.ModSeq, &m.Flags, &kws, &idate, &m.BlobID, &m.Size}
	var (
		subject, from, to, cc, bcc, refs string
		date                             sql.NullInt64
		offset                           int64
		pj                               []byte
	)
	if withParsed {
		dest = append(dest, &subject, &from, &to, &cc, &bcc, &date, &offset, &refs, &pj)
	}
	if err := rows.Scan(dest...); err != nil {
		return m, err
	}
	m.MailboxID = mailboxID
	m.Keywords = store.SplitKeywords(kws)
	m.InternalDate = time.Unix(idate, 0)
	if withParsed {
		p := &message.Parsed{}
		if err := json.Unmarshal(pj, p); err != nil {
			return m, fmt.Errorf("decode parsed message of blob %d: %w", m.BlobID, err)
		}
		// The decoded fields are not in the JSON (json:"-"); they live in columns.
		p.Subject, p.From, p.To, p.Cc, p.Bcc = subject, from, to, cc, bcc
		if refs != "" {
			p.References = strings.Split(refs, " ")
		}
		if date.Valid {
			p.Date = time.Unix(date.Int64, 0).In(time.FixedZone("", int(offset)))
		}
		m.Parsed = p
	}
	return m, nil
}

// UIDs lists the mailbox's messages in ascending UID order, without parsed
// content. It is what SELECT reads: one statement whose rows go through
// the FETCH aggregate (fetch_agg.go) instead of eight driver columns each.
func (s *Store) UIDs(ctx context.Context, mailboxID int64) ([]store.MessageMeta, error) {
	k, err := s.fetchRows(ctx, mailboxID, nil, liteMeta, false)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list messages: %w", err)
	}
	if len(k.noFetch) > 0 {
		// A blob without a blob_fetch row (none are expected): its
		// size is in blobs.
		return s.Fetch(ctx, mailboxID, nil, store.FetchOptions{})
	}
	if len(k.metas) == 0 {
		return nil, nil
	}
	return k.metas, nil
}

// Fetch returns the messages of a mailbox whose UIDs are in uids (all when
// empty), in ascending UID order.
func (s *Store) Fetch(ctx context.Context, mailboxID int64, uids store.UIDSet, opts store.FetchOptions) ([]store.MessageMeta, error) {
	tx, _, err := s.readTx(ctx, mailboxID)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	cond, args := uidSetSQL("mail.uid", uids)
	cols := metaCols
	if opts.Parsed {
		cols += parsedCols
	}
	q := "SELECT " + cols + " FROM mail JOIN blobs b ON b.id = mail.blob_id WHERE mail.mailbox_id = ? AND " +
		cond + " ORDER BY mail.uid"
	rows, err := tx.QueryContext(ctx, q, append([]any{mailboxID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: fetch: %w", err)
	}
	defer rows.Close()
	var out []store.MessageMeta
	for rows.Next() {
		m, err := scanMeta(rows, mailboxID, opts.Parsed)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: fetch: %w", err)
		}
		if inSet(uids, m.UID) {
			out = append(out, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: fetch: %w", err)
	}
	return out, nil
}

// changedQ lists the messages of mailbox ?1 whose MODSEQ is above ?2, in
// UID order, in two parts (schema step 9): those changed since their
// creation, from the index that holds just them, and the unchanged ones
// created after ?2, the UIDs above the last message created at or before
// it (found by walking the primary key back from the end). INDEXED BY
// keeps SQLite from reading the first part off the primary key, a scan of
// the whole mailbox.
const changedQ = `SELECT ` + metaCols + ` FROM mail INDEXED BY mail_modseq JOIN blobs b ON b.id = mail.blob_id
	WHERE mail.mailbox_id = ?1 AND mail.modseq > ?2 AND mail.modseq <> mail.created_modseq
UNION ALL
SELECT ` + metaCols + ` FROM mail JOIN blobs b ON b.id = mail.blob_id
	WHERE mail.mailbox_id = ?1 AND mail.modseq = mail.created_modseq AND mail.uid > coalesce((SELECT uid FROM mail
		WHERE mailbox_id = ?1 AND created_modseq <= ?2 ORDER BY uid DESC LIMIT 1), 0)
ORDER BY 1`

// Changes lists the messages added or changed and the UIDs expunged after
// sinceModSeq (RFC 7162 CONDSTORE / QRESYNC).
func (s *Store) Changes(ctx context.Context, mailboxID int64, sinceModSeq uint64) (store.Changes, error) {
	// Sessions ask after every command that changed their mailbox: the
	// queries are prepared once (readStmts).
	updated := &stmtRef{q: changedQ}
	floorQ := &stmtRef{q: "SELECT expunged_floor FROM mailboxes WHERE id = ?"}
	expunged := &stmtRef{q: "SELECT uid FROM expunged WHERE mailbox_id = ? AND modseq > ? ORDER BY uid"}
	tx, mb, err := s.readTx(ctx, mailboxID, updated, floorQ, expunged)
	if err != nil {
		return store.Changes{}, err
	}
	defer tx.Rollback()
	ch := store.Changes{HighestModSeq: mb.HighestModSeq, UIDNext: mb.UIDNext}
	rows, err := updated.st.QueryContext(ctx, mailboxID, int64(sinceModSeq))
	if err != nil {
		return store.Changes{}, fmt.Errorf("sqlite store: changes: %w", err)
	}
	for rows.Next() {
		m, err := scanMeta(rows, mailboxID, false)
		if err != nil {
			rows.Close()
			return store.Changes{}, fmt.Errorf("sqlite store: changes: %w", err)
		}
		ch.Updated = append(ch.Updated, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return store.Changes{}, fmt.Errorf("sqlite store: changes: %w", err)
	}
	var floor int64
	if err := floorQ.st.QueryRowContext(ctx, mailboxID).Scan(&floor); err != nil {
		return store.Changes{}, fmt.Errorf("sqlite store: changes: %w", err)
	}
	if int64(sinceModSeq) < floor {
		// Tombstones after sinceModSeq were pruned (pruneTombstones):
		// report every UID below UIDNEXT that is not in the mailbox.
		ch.Expunged, err = missingUIDs(ctx, tx, mailboxID, mb.UIDNext)
		if err != nil {
			return store.Changes{}, fmt.Errorf("sqlite store: changes: %w", err)
		}
		return ch, nil
	}
	rows, err = expunged.st.QueryContext(ctx, mailboxID, int64(sinceModSeq))
	if err != nil {
		return store.Changes{}, fmt.Errorf("sqlite store: changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid uint32
		if err := rows.Scan(&uid); err != nil {
			return store.Changes{}, fmt.Errorf("sqlite store: changes: %w", err)
		}
		ch.Expunged = append(ch.Expunged, uid)
	}
	if err := rows.Err(); err != nil {
		return store.Changes{}, fmt.Errorf("sqlite store: changes: %w", err)
	}
	return ch, nil
}

// missingUIDs lists, ascending, the UIDs from 1 to uidNext-1 that are not
// in the mailbox.
func missingUIDs(ctx context.Context, tx *sql.Tx, mailboxID int64, uidNext uint32) ([]uint32, error) {
	rows, err := tx.QueryContext(ctx, "SELECT uid FROM mail WHERE mailbox_id = ? ORDER BY uid", mailboxID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []uint32
	next := uint32(1)
	for rows.Next() {
		var uid uint32
		if err := rows.Scan(&uid); err != nil {
			return nil, err
		}
		for ; next < uid; next++ {
			out = append(out, next)
		}
		next = uid + 1
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for ; next < uidNext; next++ {
		out = append(out, next)
	}
	return out, nil
}
