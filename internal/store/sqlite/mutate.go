package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"pimail/internal/store"
)

// nextModSeq takes the mailbox's next modification sequence (RFC 7162 §3.1:
// every change gets a value greater than all before it). One command's
// changes share one value.
func nextModSeq(w *wtx, mailboxID int64) (uint64, error) {
	var ms uint64
	if err := w.queryRow("UPDATE mailboxes SET highestmodseq = highestmodseq + 1 WHERE id = ? RETURNING highestmodseq", mailboxID).Scan(&ms); err != nil {
		return 0, fmt.Errorf("next modseq of mailbox %d: %w", mailboxID, err)
	}
	return ms, nil
}

// takeUIDs reserves n consecutive UIDs in a mailbox and returns the first.
// UIDNEXT only grows (RFC 9051 §2.3.1.1).
func takeUIDs(w *wtx, mailboxID int64, n int) (uint32, error) {
	var next int64
	if err := w.queryRow("UPDATE mailboxes SET uidnext = uidnext + ? WHERE id = ? RETURNING uidnext", n, mailboxID).Scan(&next); err != nil {
		return 0, fmt.Errorf("take uids in mailbox %d: %w", mailboxID, err)
	}
	first := next - int64(n)
	if next > 0xffffffff {
		return 0, fmt.Errorf("mailbox %d: UID space exhausted: %w", mailboxID, store.ErrInvalid)
	}
	return uint32(first), nil
}

// mailRow is a message row as the write paths need it.
type mailRow struct {
	uid      uint32
	flags    store.Flags
	keywords []string
	idate    int64
	blobID   int64
}

// mailRows lists a mailbox's rows in uids (all when empty), ascending UID.
func mailRows(w *wtx, mailboxID int64, uids store.UIDSet) ([]mailRow, error) {
	cond, args := uidSetSQL("uid", uids)
	rows, err := w.query("SELECT uid, flags, keywords, internal_date, blob_id FROM mail WHERE mailbox_id = ? AND "+cond+" ORDER BY uid",
		append([]any{mailboxID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	defer rows.Close()
	var out []mailRow
	for rows.Next() {
		var r mailRow
		var kws string
		if err := rows.Scan(&r.uid, &r.flags, &kws, &r.idate, &r.blobID); err != nil {
			return nil, fmt.Errorf("list messages: %w", err)
		}
		r.keywords = store.SplitKeywords(kws)
		if inSet(uids, r.uid) {
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return out, nil
}

// StoreFlags changes flags and keywords (RFC 9051 §6.4.6). Only messages
// whose flags really change get a new MODSEQ; they are returned.
func (s *Store) StoreFlags(ctx context.Context, mailboxID int64, uids store.UIDSet, op store.FlagOp, flags store.Flags, keywords []string) ([]store.FlagUpdate, error) {
	if op != store.FlagsAdd && op != store.FlagsRemove && op != store.FlagsReplace {
		return nil, fmt.Errorf("flag operation %d: %w", op, store.ErrInvalid)
	}
	kws, err := store.NormalizeKeywords(keywords)
	if err != nil {
		return nil, err
	}
	flags &= store.AllFlags
	var out []store.FlagUpdate
	// A flag change lost to a power failure loses no mail: it is committed
	// without fsync (writeRelaxed, see doc.go).
	err = s.writeRelaxed(ctx, func(w *wtx) error {
		out = nil
		mb, err := mailboxByID(w, mailboxID)
		if err != nil {
			return err
		}
		rows, err := mailRows(w, mailboxID, uids)
		if err != nil {
			return err
		}
		var ms uint64
		for _, r := range rows {
			nf := r.flags
			switch op {
			case store.FlagsAdd:
				nf |= flags
			case store.FlagsRemove:
				nf &^= flags
			case store.FlagsReplace:
				nf = flags
			}
			nk := store.MergeKeywords(r.keywords, op, kws)
			if nf == r.flags && store.JoinKeywords(nk) == store.JoinKeywords(r.keywords) {
				continue
			}
			if ms == 0 {
				if ms, err = nextModSeq(w, mailboxID); err != nil {
					return err
				}
			}
			if _, err := w.exec("UPDATE mail SET flags = ?, keywords = ?, modseq = ? WHERE mailbox_id = ? AND uid = ?",
				nf, store.JoinKeywords(nk), ms, mailboxID, r.uid); err != nil {
				return fmt.Errorf("update flags: %w", err)
			}
			out = append(out, store.FlagUpdate{UID: r.uid, ModSeq: ms, Flags: nf, Keywords: nk})
		}
		if len(out) > 0 {
			w.publish(mb.AccountID, mailboxID)
		}
		return nil
	})
	return out, err
}

// copyMail copies rows into dst (insertMail) and bumps the blob
// reference counts.
func copyMail(w *wtx, rows []mailRow, dst store.Mailbox) (store.CopyResult, error) {
	res, err := insertMail(w, rows, dst)
	if err != nil {
		return res, err
	}
	for _, r := range rows {
		if _, err := w.exec("UPDATE blobs SET refcount = refcount + 1 WHERE id = ?", r.blobID); err != nil {
			return res, fmt.Errorf("copy message: %w", err)
		}
	}
	return res, nil
}

// insertMail inserts rows into dst with new UIDs in the order of rows
// (COPY and MOVE pass them in source-UID order) and one new MODSEQ in dst.
// The caller counts the blob references.
func insertMail(w *wtx, rows []mailRow, dst store.Mailbox) (store.CopyResult, error) {
	res := store.CopyResult{UIDValidity: dst.UIDValidity}
	if len(rows) == 0 {
		return res, nil
	}
	first, err := takeUIDs(w, dst.ID, len(rows))
	if err != nil {
		return res, err
	}
	ms, err := nextModSeq(w, dst.ID)
	if err != nil {
		return res, err
	}
	for i, r := range rows {
		uid := first + uint32(i)
		if err := w.insertMail(dst.ID, uid, ms, r.flags, store.JoinKeywords(r.keywords), r.idate, r.blobID); err != nil {
			return res, fmt.Errorf("insert message: %w", err)
		}
		res.SourceUIDs = append(res.SourceUIDs, r.uid)
		res.DestUIDs = append(res.DestUIDs, uid)
	}
	w.publish(dst.AccountID, dst.ID)
	return res, nil
}

// expungeMail deletes rows from a mailbox, writes tombstones with one new
// MODSEQ (RFC 7162 §3.2.10 VANISHED needs them) and releases the blobs.
// Each step is one statement over all rows (the UIDs and blob IDs passed
// as JSON arrays), so that SQLite journals every page it changes once per
// expunge rather than once per message. Two costs per message are kept
// out of it (schema step 8): the account's used_bytes drops by one sum
// over the rows (usage_hold suspends the per-row trigger for the
// mailbox), and the blob reference counts drop in the background
// (blob_release, applied by the collector), so the expunge appends a few
// pages instead of rewriting one blobs row per message.
func expungeMail(w *wtx, mb store.Mailbox, rows []mailRow) error {
	if len(rows) == 0 {
		return nil
	}
	uids := make([]int64, len(rows))
	for i, r := range rows {
		uids[i] = int64(r.uid)
	}
	if err := holdUsage(w, mb.ID, true); err != nil {
		return err
	}
	if _, err := w.exec("DELETE FROM mail WHERE mailbox_id = ? AND uid IN (SELECT value FROM json_each(?))", mb.ID, jsonInts(uids)); err != nil {
		return fmt.Errorf("expunge: %w", err)
	}
	if err := holdUsage(w, mb.ID, false); err != nil {
		return err
	}
	return expunged(w, mb, rows)
}

// holdUsage suspends (or resumes) the per-row usage trigger for the
// mailbox's deleted rows (schema step 8): the caller accounts for them
// with expunged.
func holdUsage(w *wtx, mailboxID int64, hold bool) error {
	q := "INSERT INTO usage_hold (mailbox_id) VALUES (?)"
	if !hold {
		q = "DELETE FROM usage_hold WHERE mailbox_id = ?"
	}
	if _, err := w.exec(q, mailboxID); err != nil {
		return fmt.Errorf("expunge: usage hold: %w", err)
	}
	return nil
}

// expunged does the rest of an expunge once the rows (ascending UID) are
// deleted under a usage hold: the account's usage, the tombstones with a
// new MODSEQ, the blob releases, the change event.
func expunged(w *wtx, mb store.Mailbox, rows []mailRow) error {
	ms, err := nextModSeq(w, mb.ID)
	if err != nil {
		return err
	}
	uids := make([]int64, len(rows))
	blobs := make([]int64, len(rows))
	for i, r := range rows {
		uids[i], blobs[i] = int64(r.uid), r.blobID
	}
	uj, bj := jsonInts(uids), jsonInts(blobs)
	// Quota (RFC 9208): one row per message, so a blob held twice counts
	// twice. The sizes come from the narrow blob_fetch rows (fewer pages
	// to read than blobs), from blobs for a blob without one.
	if _, err := w.exec(`UPDATE accounts SET used_bytes = used_bytes -
		(SELECT coalesce(sum(coalesce(f.size, (SELECT size FROM blobs WHERE id = j.value))), 0)
			FROM json_each(?) AS j LEFT JOIN blob_fetch f ON f.blob_id = j.value)
		WHERE id = ?`, bj, mb.AccountID); err != nil {
		return fmt.Errorf("expunge: account usage: %w", err)
	}
	if _, err := w.exec("INSERT OR REPLACE INTO expunged (mailbox_id, uid, modseq) SELECT ?, value, ? FROM json_each(?)", mb.ID, ms, uj); err != nil {
		return fmt.Errorf("expunge tombstones: %w", err)
	}
	if _, err := w.exec("INSERT INTO blob_release (blob_id) SELECT value FROM json_each(?)", bj); err != nil {
		return fmt.Errorf("expunge: release blobs: %w", err)
	}
	if err := pruneTombstones(w, mb.ID); err != nil {
		return err
	}
	w.publish(mb.AccountID, mb.ID)
	return nil
}

// expungeFlagged is expungeMail for the rows with FlagDeleted in uids (all
// when empty), found and deleted by one statement; the rows go in
// ascending UID. uidSetSQL is exact only up to 32 ranges: beyond, the
// rows are listed first (deletedRows) and deleted by UID.
func expungeFlagged(w *wtx, mb store.Mailbox, uids store.UIDSet) ([]mailRow, error) {
	if len(uids) > 32 {
		rows, err := deletedRows(w, mb.ID, uids)
		if err != nil {
			return nil, err
		}
		return rows, expungeMail(w, mb, rows)
	}
	if err := holdUsage(w, mb.ID, true); err != nil {
		return nil, err
	}
	cond, args := uidSetSQL("uid", uids)
	q := fmt.Sprintf("DELETE FROM mail WHERE mailbox_id = ? AND flags & %d <> 0 AND ", store.FlagDeleted) + cond + " RETURNING uid, blob_id"
	rs, err := w.query(q, append([]any{mb.ID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("expunge: %w", err)
	}
	var out []mailRow
	for rs.Next() {
		r := mailRow{flags: store.FlagDeleted}
		if err := rs.Scan(&r.uid, &r.blobID); err != nil {
			rs.Close()
			return nil, fmt.Errorf("expunge: %w", err)
		}
		out = append(out, r)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("expunge: %w", err)
	}
	if err := holdUsage(w, mb.ID, false); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.SortFunc(out, func(a, b mailRow) int { return cmp.Compare(a.uid, b.uid) })
	return out, expunged(w, mb, out)
}

// tombstoneLimit bounds the expunge tombstones kept per mailbox: beyond
// it, the oldest are pruned down to half of it (tests lower it).
var tombstoneLimit = 20000

// pruneTombstones removes the oldest tombstones of a mailbox that has more
// than tombstoneLimit, and raises mailboxes.expunged_floor to the highest
// MODSEQ removed. Changes then answers a client whose MODSEQ is below the
// floor with every UID below UIDNEXT that is not in the mailbox (see
// Changes), which RFC 7162 allows: a VANISHED (EARLIER) response may name
// UIDs the client never saw (§3.2.10), and a server that no longer knows
// which messages were expunged since the client's MODSEQ reports all
// missing ones (§3.2.5.2, §6). The check walks at most tombstoneLimit
// entries of the (mailbox_id, modseq) index.
func pruneTombstones(w *wtx, mailboxID int64) error {
	var over int64
	err := w.queryRow("SELECT modseq FROM expunged WHERE mailbox_id = ? ORDER BY modseq DESC LIMIT 1 OFFSET ?",
		mailboxID, tombstoneLimit).Scan(&over)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("count tombstones: %w", err)
	}
	// Keep the newest half: everything up to the MODSEQ of the first
	// tombstone beyond it goes (one MODSEQ is never split).
	var floor int64
	if err := w.queryRow("SELECT modseq FROM expunged WHERE mailbox_id = ? ORDER BY modseq DESC LIMIT 1 OFFSET ?",
		mailboxID, tombstoneLimit/2).Scan(&floor); err != nil {
		return fmt.Errorf("prune tombstones: %w", err)
	}
	if _, err := w.exec("DELETE FROM expunged WHERE mailbox_id = ? AND modseq <= ?", mailboxID, floor); err != nil {
		return fmt.Errorf("prune tombstones: %w", err)
	}
	if _, err := w.exec("UPDATE mailboxes SET expunged_floor = max(expunged_floor, ?) WHERE id = ?", floor, mailboxID); err != nil {
		return fmt.Errorf("prune tombstones: %w", err)
	}
	return nil
}

// jsonInts writes integers as a JSON array (for json_each).
func jsonInts(v []int64) string {
	b := make([]byte, 0, 8*len(v)+2)
	b = append(b, '[')
	for i, n := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return string(append(b, ']'))
}

// deletedRows lists the rows of a mailbox in uids (all when empty) that
// have FlagDeleted, ascending UID; the flag is tested by SQLite, so only
// those rows reach Go.
func deletedRows(w *wtx, mailboxID int64, uids store.UIDSet) ([]mailRow, error) {
	cond, args := uidSetSQL("uid", uids)
	rows, err := w.query(fmt.Sprintf("SELECT uid, blob_id FROM mail WHERE mailbox_id = ? AND flags & %d <> 0 AND ", store.FlagDeleted)+cond+" ORDER BY uid",
		append([]any{mailboxID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("list deleted messages: %w", err)
	}
	defer rows.Close()
	var out []mailRow
	for rows.Next() {
		var r mailRow
		if err := rows.Scan(&r.uid, &r.blobID); err != nil {
			return nil, fmt.Errorf("list deleted messages: %w", err)
		}
		if inSet(uids, r.uid) {
			r.flags = store.FlagDeleted
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list deleted messages: %w", err)
	}
	return out, nil
}

// copyOrMove is Copy and Move: both mailboxes must belong to one account.
func (s *Store) copyOrMove(ctx context.Context, srcID int64, uids store.UIDSet, dstID int64, move bool) (store.CopyResult, error) {
	var out store.CopyResult
	err := s.write(ctx, func(w *wtx) error {
		out = store.CopyResult{}
		src, err := mailboxByID(w, srcID)
		if err != nil {
			return err
		}
		dst, err := mailboxByID(w, dstID)
		if err != nil {
			return err
		}
		if src.AccountID != dst.AccountID {
			return fmt.Errorf("copy between accounts: %w", store.ErrInvalid)
		}
		rows, err := mailRows(w, srcID, uids)
		if err != nil {
			return err
		}
		if out, err = copyMail(w, rows, dst); err != nil {
			return err
		}
		if move {
			return expungeMail(w, src, rows)
		}
		return nil
	})
	if err == nil && move {
		s.kickCollector()
	}
	return out, err
}

// Copy copies messages to another mailbox of the same account (RFC 9051
// §6.4.7, UIDPLUS RFC 4315 COPYUID).
func (s *Store) Copy(ctx context.Context, srcMailboxID int64, uids store.UIDSet, dstMailboxID int64) (store.CopyResult, error) {
	return s.copyOrMove(ctx, srcMailboxID, uids, dstMailboxID, false)
}

// Move is Copy plus expunge of the sources in one transaction (RFC 6851).
func (s *Store) Move(ctx context.Context, srcMailboxID int64, uids store.UIDSet, dstMailboxID int64) (store.CopyResult, error) {
	return s.copyOrMove(ctx, srcMailboxID, uids, dstMailboxID, true)
}

// Expunge removes the messages in uids (all when empty) that have
// FlagDeleted and returns their UIDs, ascending (RFC 9051 §6.4.3, UID
// EXPUNGE RFC 4315).
func (s *Store) Expunge(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]uint32, error) {
	var out []uint32
	// An expunge lost to a power failure loses no mail (the messages come
	// back): it is committed without fsync (writeRelaxed, see doc.go).
	err := s.writeRelaxed(ctx, func(w *wtx) error {
		out = nil
		mb, err := mailboxByID(w, mailboxID)
		if err != nil {
			return err
		}
		del, err := expungeFlagged(w, mb, uids)
		if err != nil {
			return err
		}
		for _, r := range del {
			out = append(out, r.uid)
		}
		return nil
	})
	if err == nil && len(out) > 0 {
		s.kickCollector()
	}
	return out, err
}
