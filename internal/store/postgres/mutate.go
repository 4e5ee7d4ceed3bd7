package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// Every write to a mailbox's messages starts by locking the mailbox row
// (lockMailbox, or claimSlot's UPDATE for a delivery), and holds the lock
// until its commit: writers of one mailbox, on any node, take turns, so
// that what one reads (flags to change, rows to expunge) is what it
// writes over, and the UIDs and MODSEQs it takes are committed in the
// order they were taken (RFC 9051 §2.3.1.1, RFC 7162 §3.1). Several
// mailboxes are locked in one order, (account, name), so that two writers
// never wait for each other.

// lockMailbox locks a mailbox by ID, or (id 0) by account and name.
func lockMailbox(w *wtx, id, accountID int64, name string) (store.Mailbox, error) {
	var row pgx.Row
	if id != 0 {
		row = w.queryRow("SELECT "+mailboxCols+" FROM mailboxes WHERE id = $1 FOR UPDATE", id)
	} else {
		row = w.queryRow("SELECT "+mailboxCols+" FROM mailboxes WHERE account_id = $1 AND name = $2 FOR UPDATE", accountID, name)
	}
	m, err := scanMailbox(row)
	if noRows(err) {
		return m, fmt.Errorf("mailbox %d %q: %w", id, name, store.ErrNotFound)
	}
	if err != nil {
		return m, fmt.Errorf("lock mailbox %d %q: %w", id, name, err)
	}
	return m, nil
}

// lockMailboxes locks mailboxes by ID, in (account, name) order, and
// returns them in the order of ids.
func lockMailboxes(w *wtx, ids ...int64) ([]store.Mailbox, error) {
	rows, _ := w.query("SELECT "+mailboxCols+" FROM mailboxes WHERE id = ANY($1) ORDER BY account_id, name FOR UPDATE", ids)
	mbs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Mailbox, error) { return scanMailbox(r) })
	if err != nil {
		return nil, fmt.Errorf("lock mailboxes: %w", err)
	}
	out := make([]store.Mailbox, len(ids))
	for i, id := range ids {
		found := false
		for _, m := range mbs {
			if m.ID == id {
				out[i], found = m, true
			}
		}
		if !found {
			return nil, fmt.Errorf("mailbox %d: %w", id, store.ErrNotFound)
		}
	}
	return out, nil
}

// nextModSeq takes the mailbox's next modification sequence (RFC 7162
// §3.1). One command's changes share one value.
func nextModSeq(w *wtx, mailboxID int64) (uint64, error) {
	var ms uint64
	if err := w.queryRow("UPDATE mailboxes SET highestmodseq = highestmodseq + 1 WHERE id = $1 RETURNING highestmodseq", mailboxID).Scan(&ms); err != nil {
		return 0, fmt.Errorf("next modseq of mailbox %d: %w", mailboxID, err)
	}
	return ms, nil
}

// takeUIDs reserves n consecutive UIDs in a mailbox and returns the
// first; UIDNEXT only grows (RFC 9051 §2.3.1.1). With them it takes the
// next MODSEQ, which the new rows share.
func takeUIDs(w *wtx, mailboxID int64, n int) (uint32, uint64, error) {
	var next int64
	var ms uint64
	if err := w.queryRow(`UPDATE mailboxes SET uidnext = uidnext + $1, highestmodseq = highestmodseq + 1 WHERE id = $2
		RETURNING uidnext, highestmodseq`, n, mailboxID).Scan(&next, &ms); err != nil {
		return 0, 0, fmt.Errorf("take uids in mailbox %d: %w", mailboxID, err)
	}
	if next > maxUID+1 {
		return 0, 0, fmt.Errorf("mailbox %d: UID space exhausted: %w", mailboxID, store.ErrInvalid)
	}
	return uint32(next - int64(n)), ms, nil
}

// mailRow is a message row as the write paths need it.
type mailRow struct {
	uid      uint32
	flags    store.Flags
	keywords []string
	idate    int64
	blobID   int64
	size     int64
}

// mailRows lists a mailbox's rows in uids (all when empty), ascending UID.
func mailRows(w *wtx, mailboxID int64, uids store.UIDSet) ([]mailRow, error) {
	ss := spans(uids)
	p := params{mailboxID}
	cond, _ := uidCond("m.uid", ss, &p)
	rows, _ := w.query(`SELECT m.uid, m.flags, m.keywords, m.internal_date, m.blob_id, b.size
		FROM mail m JOIN blobs b ON b.id = m.blob_id WHERE m.mailbox_id = $1 AND `+cond+` ORDER BY m.uid`, p...)
	var out []mailRow
	var r mailRow
	var kws string
	_, err := pgx.ForEachRow(rows, []any{&r.uid, &r.flags, &kws, &r.idate, &r.blobID, &r.size}, func() error {
		if inSpans(ss, r.uid) {
			r.keywords = store.SplitKeywords(kws)
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
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
	err = s.write(ctx, func(w *wtx) error {
		out = nil
		mb, err := lockMailbox(w, mailboxID, 0, "")
		if err != nil {
			return err
		}
		rows, err := mailRows(w, mailboxID, uids)
		if err != nil {
			return err
		}
		var (
			changedUIDs []int64
			newFlags    []int32
			newKws      []string
		)
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
			changedUIDs = append(changedUIDs, int64(r.uid))
			newFlags = append(newFlags, int32(nf))
			newKws = append(newKws, store.JoinKeywords(nk))
			out = append(out, store.FlagUpdate{UID: r.uid, Flags: nf, Keywords: nk})
		}
		if len(out) == 0 {
			return nil
		}
		ms, err := nextModSeq(w, mailboxID)
		if err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE mail m SET flags = c.flags, keywords = c.keywords, modseq = $2
			FROM unnest($3::bigint[], $4::integer[], $5::text[]) AS c(uid, flags, keywords)
			WHERE m.mailbox_id = $1 AND m.uid = c.uid`, mailboxID, ms, changedUIDs, newFlags, newKws); err != nil {
			return fmt.Errorf("update flags: %w", err)
		}
		for i := range out {
			out[i].ModSeq = ms
		}
		w.publish(mb.AccountID, mailboxID)
		return nil
	})
	return out, err
}

// copyMail copies rows into dst (insertMail), counts the new blob
// references and charges the account.
func copyMail(w *wtx, rows []mailRow, dst store.Mailbox) (store.CopyResult, error) {
	res, err := insertMail(w, rows, dst)
	if err != nil || len(rows) == 0 {
		return res, err
	}
	blobs := make([]int64, len(rows))
	var size int64
	for i, r := range rows {
		blobs[i] = r.blobID
		size += r.size
	}
	if _, err := w.exec(`UPDATE blobs SET refcount = refcount + c.n FROM
		(SELECT b, count(*) AS n FROM unnest($1::bigint[]) b GROUP BY b) AS c WHERE blobs.id = c.b`, blobs); err != nil {
		return res, fmt.Errorf("copy message: %w", err)
	}
	return res, addUsage(w, dst.AccountID, size)
}

// insertMail inserts rows into dst (locked) with new UIDs in the order
// of rows (COPY and MOVE pass them in source-UID order) and one new
// MODSEQ. The caller counts the blob references and the usage.
func insertMail(w *wtx, rows []mailRow, dst store.Mailbox) (store.CopyResult, error) {
	res := store.CopyResult{UIDValidity: dst.UIDValidity}
	if len(rows) == 0 {
		return res, nil
	}
	first, ms, err := takeUIDs(w, dst.ID, len(rows))
	if err != nil {
		return res, err
	}
	uids := make([]int64, len(rows))
	flags := make([]int32, len(rows))
	kws := make([]string, len(rows))
	idates := make([]int64, len(rows))
	blobs := make([]int64, len(rows))
	for i, r := range rows {
		uid := first + uint32(i)
		uids[i], flags[i], kws[i], idates[i], blobs[i] = int64(uid), int32(r.flags), store.JoinKeywords(r.keywords), r.idate, r.blobID
		res.SourceUIDs = append(res.SourceUIDs, r.uid)
		res.DestUIDs = append(res.DestUIDs, uid)
	}
	if _, err := w.exec(`INSERT INTO mail (mailbox_id, uid, modseq, created_modseq, flags, keywords, internal_date, blob_id)
		SELECT $1, u, $2, $2, f, k, d, b FROM unnest($3::bigint[], $4::integer[], $5::text[], $6::bigint[], $7::bigint[]) AS r(u, f, k, d, b)`,
		dst.ID, ms, uids, flags, kws, idates, blobs); err != nil {
		return res, fmt.Errorf("insert messages: %w", err)
	}
	w.publish(dst.AccountID, dst.ID)
	return res, nil
}

// expungeMail deletes rows (ascending UID) from a locked mailbox, writes
// tombstones with one new MODSEQ (RFC 7162 §3.2.10 VANISHED needs them),
// releases the blob references and the account's usage.
func expungeMail(w *wtx, mb store.Mailbox, rows []mailRow) error {
	if len(rows) == 0 {
		return nil
	}
	uids := make([]int64, len(rows))
	for i, r := range rows {
		uids[i] = int64(r.uid)
	}
	if _, err := w.exec("DELETE FROM mail WHERE mailbox_id = $1 AND uid = ANY($2)", mb.ID, uids); err != nil {
		return fmt.Errorf("expunge: %w", err)
	}
	return expunged(w, mb, rows)
}

// expunged does the rest of an expunge once the rows are deleted: the
// blob references, the account's usage, the tombstones with a new MODSEQ,
// the change event.
func expunged(w *wtx, mb store.Mailbox, rows []mailRow) error {
	ms, err := nextModSeq(w, mb.ID)
	if err != nil {
		return err
	}
	uids := make([]int64, len(rows))
	blobs := make([]int64, len(rows))
	var size int64
	for i, r := range rows {
		uids[i], blobs[i] = int64(r.uid), r.blobID
		size += r.size
	}
	if _, err := w.exec(`UPDATE blobs SET refcount = refcount - c.n FROM
		(SELECT b, count(*) AS n FROM unnest($1::bigint[]) b GROUP BY b) AS c WHERE blobs.id = c.b`, blobs); err != nil {
		return fmt.Errorf("expunge: release blobs: %w", err)
	}
	if err := addUsage(w, mb.AccountID, -size); err != nil {
		return err
	}
	if _, err := w.exec(`INSERT INTO expunged (mailbox_id, uid, modseq) SELECT $1, u, $2 FROM unnest($3::bigint[]) u
		ON CONFLICT (mailbox_id, uid) DO UPDATE SET modseq = excluded.modseq`, mb.ID, ms, uids); err != nil {
		return fmt.Errorf("expunge tombstones: %w", err)
	}
	if err := pruneTombstones(w, mb.ID); err != nil {
		return err
	}
	w.publish(mb.AccountID, mb.ID)
	return nil
}

// tombstoneLimit bounds the expunge tombstones kept per mailbox: beyond
// it, the oldest are pruned down to half of it.
const tombstoneLimit = 20000

// pruneTombstones removes the oldest tombstones of a mailbox that has
// more than tombstoneLimit and raises mailboxes.expunged_floor to the
// highest MODSEQ removed; Changes then reports every UID below UIDNEXT
// that is not in the mailbox to a client whose MODSEQ is below the floor
// (RFC 7162 §3.2.5.2, §6 allow it).
func pruneTombstones(w *wtx, mailboxID int64) error {
	var over int64
	err := w.queryRow("SELECT modseq FROM expunged WHERE mailbox_id = $1 ORDER BY modseq DESC LIMIT 1 OFFSET $2",
		mailboxID, tombstoneLimit).Scan(&over)
	if noRows(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("count tombstones: %w", err)
	}
	var floor int64
	if err := w.queryRow("SELECT modseq FROM expunged WHERE mailbox_id = $1 ORDER BY modseq DESC LIMIT 1 OFFSET $2",
		mailboxID, tombstoneLimit/2).Scan(&floor); err != nil {
		return fmt.Errorf("prune tombstones: %w", err)
	}
	if _, err := w.exec("DELETE FROM expunged WHERE mailbox_id = $1 AND modseq <= $2", mailboxID, floor); err != nil {
		return fmt.Errorf("prune tombstones: %w", err)
	}
	if _, err := w.exec("UPDATE mailboxes SET expunged_floor = greatest(expunged_floor, $1) WHERE id = $2", floor, mailboxID); err != nil {
		return fmt.Errorf("prune tombstones: %w", err)
	}
	return nil
}

// copyOrMove is Copy and Move: both mailboxes must belong to one account.
func (s *Store) copyOrMove(ctx context.Context, srcID int64, uids store.UIDSet, dstID int64, move bool) (store.CopyResult, error) {
	var out store.CopyResult
	err := s.write(ctx, func(w *wtx) error {
		out = store.CopyResult{}
		mbs, err := lockMailboxes(w, srcID, dstID)
		if err != nil {
			return err
		}
		src, dst := mbs[0], mbs[1]
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
	err := s.write(ctx, func(w *wtx) error {
		out = nil
		mb, err := lockMailbox(w, mailboxID, 0, "")
		if err != nil {
			return err
		}
		ss := spans(uids)
		p := params{mb.ID}
		cond, exact := uidCond("m.uid", ss, &p)
		var del []mailRow
		if exact {
			// Found and deleted by one statement.
			rows, _ := w.query(fmt.Sprintf(`WITH d AS (DELETE FROM mail m WHERE m.mailbox_id = $1 AND m.flags & %d <> 0 AND %s
				RETURNING m.uid, m.blob_id) SELECT d.uid, d.blob_id, b.size FROM d JOIN blobs b ON b.id = d.blob_id ORDER BY d.uid`,
				store.FlagDeleted, cond), p...)
			var r mailRow
			_, err = pgx.ForEachRow(rows, []any{&r.uid, &r.blobID, &r.size}, func() error {
				del = append(del, r)
				return nil
			})
			if err != nil {
				return fmt.Errorf("expunge: %w", err)
			}
			if len(del) > 0 {
				err = expunged(w, mb, del)
			}
		} else {
			var all []mailRow
			if all, err = mailRows(w, mb.ID, uids); err != nil {
				return err
			}
			for _, r := range all {
				if r.flags&store.FlagDeleted != 0 {
					del = append(del, r)
				}
			}
			err = expungeMail(w, mb, del)
		}
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
