package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/message"
	"pimail/internal/store"
	"pimail/internal/store/envcodec"
)

// Reads of a mailbox run in one repeatable-read transaction that first
// finds the mailbox (ErrNotFound rather than an empty list), so that the
// mailbox and its rows come from one snapshot.

// readMailbox runs fn in a read transaction after finding the mailbox.
func (s *Store) readMailbox(ctx context.Context, mailboxID int64, fn func(tx pgx.Tx, mb store.Mailbox) error) error {
	return s.readTx(ctx, func(tx pgx.Tx) error {
		mb, err := scanMailbox(tx.QueryRow(ctx, "SELECT "+mailboxCols+" FROM mailboxes WHERE id = $1", mailboxID))
		if noRows(err) {
			return fmt.Errorf("mailbox %d: %w", mailboxID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("mailbox %d: %w", mailboxID, err)
		}
		return fn(tx, mb)
	})
}

const metaCols = "m.uid, m.modseq, m.flags, m.keywords, m.internal_date, m.blob_id, b.size"

// metaScan scans metaCols (and the extra columns) into a MessageMeta.
type metaScan struct {
	m     store.MessageMeta
	kws   string
	idate int64
}

func (ms *metaScan) dest(extra ...any) []any {
	return append([]any{&ms.m.UID, &ms.m.ModSeq, &ms.m.Flags, &ms.kws, &ms.idate, &ms.m.BlobID, &ms.m.Size}, extra...)
}

func (ms *metaScan) meta(mailboxID int64) store.MessageMeta {
	m := ms.m
	m.MailboxID = mailboxID
	m.Keywords = store.SplitKeywords(ms.kws)
	m.InternalDate = time.Unix(ms.idate, 0)
	return m
}

// forMessages runs a query of the mailbox's messages in uids (metaCols
// plus extra columns, from mail m JOIN blobs b and what join adds) and
// calls fn for each row, ascending UID.
func forMessages(ctx context.Context, tx pgx.Tx, mailboxID int64, uids store.UIDSet, extraCols, join string, extra []any, fn func(m store.MessageMeta) error) error {
	ss := spans(uids)
	p := params{mailboxID}
	cond, _ := uidCond("m.uid", ss, &p)
	rows, _ := tx.Query(ctx, "SELECT "+metaCols+extraCols+" FROM mail m JOIN blobs b ON b.id = m.blob_id"+join+
		" WHERE m.mailbox_id = $1 AND "+cond+" ORDER BY m.uid", p...)
	var sc metaScan
	_, err := pgx.ForEachRow(rows, sc.dest(extra...), func() error {
		if !inSpans(ss, sc.m.UID) {
			return nil
		}
		return fn(sc.meta(mailboxID))
	})
	return err
}

// UIDs lists the mailbox's messages in ascending UID order, without
// parsed content: what SELECT reads.
func (s *Store) UIDs(ctx context.Context, mailboxID int64) ([]store.MessageMeta, error) {
	return s.Fetch(ctx, mailboxID, nil, store.FetchOptions{})
}

// Fetch returns the messages of a mailbox whose UIDs are in uids (all
// when empty), in ascending UID order.
func (s *Store) Fetch(ctx context.Context, mailboxID int64, uids store.UIDSet, opts store.FetchOptions) ([]store.MessageMeta, error) {
	var out []store.MessageMeta
	err := s.readMailbox(ctx, mailboxID, func(tx pgx.Tx, _ store.Mailbox) error {
		out = nil
		if !opts.Parsed {
			return forMessages(ctx, tx, mailboxID, uids, "", "", nil, func(m store.MessageMeta) error {
				out = append(out, m)
				return nil
			})
		}
		var (
			subject, from, to, cc, bcc, refs, pj []byte
			date                                 *int64
			offset                               int32
		)
		return forMessages(ctx, tx, mailboxID, uids,
			", i.subject, i.from_addr, i.to_addr, i.cc_addr, i.bcc_addr, i.date, i.date_offset, i.refs, i.parsed",
			" JOIN blob_meta i ON i.blob_id = m.blob_id",
			[]any{&subject, &from, &to, &cc, &bcc, &date, &offset, &refs, &pj},
			func(m store.MessageMeta) error {
				p := &message.Parsed{}
				if err := json.Unmarshal(pj, p); err != nil {
					return fmt.Errorf("decode parsed message of blob %d: %w", m.BlobID, err)
				}
				// The decoded fields are not in the JSON (json:"-"); they are columns.
				p.Subject, p.From, p.To, p.Cc, p.Bcc = string(subject), string(from), string(to), string(cc), string(bcc)
				if len(refs) > 0 {
					p.References = strings.Split(string(refs), " ")
				}
				if date != nil {
					p.Date = time.Unix(*date, 0).In(time.FixedZone("", int(offset)))
				}
				m.Parsed = p
				out = append(out, m)
				return nil
			})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FetchEnvelopes is Fetch whose Parsed holds only the envelope (RFC 9051
// §7.5.2), decoded from the compact form (envcodec) kept per blob.
func (s *Store) FetchEnvelopes(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, error) {
	var out []store.MessageMeta
	err := s.readMailbox(ctx, mailboxID, func(tx pgx.Tx, _ store.Mailbox) error {
		out = nil
		var arena envcodec.Arena
		var env []byte
		return forMessages(ctx, tx, mailboxID, uids, ", i.envelope", " JOIN blob_meta i ON i.blob_id = m.blob_id", []any{&env},
			func(m store.MessageMeta) error {
				// env is a copy of the row's (pgx copies bytea): the
				// envelope's strings may point into it.
				e, err := envcodec.DecodeShared(env, &arena)
				if err != nil {
					return fmt.Errorf("envelope of blob %d: %w", m.BlobID, err)
				}
				m.Parsed = &message.Parsed{Envelope: e}
				out = append(out, m)
				return nil
			})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FetchEnvelopesBuffered is FetchEnvelopes: this store keeps no buffers,
// and release does nothing.
func (s *Store) FetchEnvelopesBuffered(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, func(), error) {
	metas, err := s.FetchEnvelopes(ctx, mailboxID, uids)
	return metas, noRelease, err
}

func noRelease() {}

// FetchHeaders is Fetch without Parsed, plus each message's header as
// kept per blob.
func (s *Store) FetchHeaders(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, [][]byte, error) {
	var (
		out     []store.MessageMeta
		headers [][]byte
	)
	err := s.readMailbox(ctx, mailboxID, func(tx pgx.Tx, _ store.Mailbox) error {
		out, headers = nil, nil
		var h []byte
		return forMessages(ctx, tx, mailboxID, uids, ", i.header", " JOIN blob_meta i ON i.blob_id = m.blob_id", []any{&h},
			func(m store.MessageMeta) error {
				out = append(out, m)
				headers = append(headers, h)
				return nil
			})
	})
	if err != nil {
		return nil, nil, err
	}
	return out, headers, nil
}

// FetchHeadersBuffered is FetchHeaders (sizes included); release does
// nothing.
func (s *Store) FetchHeadersBuffered(ctx context.Context, mailboxID int64, uids store.UIDSet, _ bool) ([]store.MessageMeta, [][]byte, func(), error) {
	metas, headers, err := s.FetchHeaders(ctx, mailboxID, uids)
	return metas, headers, noRelease, err
}

// changedQ lists the messages of mailbox $1 whose MODSEQ is above $2, in
// UID order, in two parts: those changed since their creation, from the
// partial index that holds just them, and the unchanged ones created
// after $2, the UIDs above the last message created at or before it
// (UIDs and creation MODSEQs grow together).
const changedQ = `SELECT ` + metaCols + ` FROM mail m JOIN blobs b ON b.id = m.blob_id
	WHERE m.mailbox_id = $1 AND m.modseq > $2 AND m.modseq <> m.created_modseq
UNION ALL
SELECT ` + metaCols + ` FROM mail m JOIN blobs b ON b.id = m.blob_id
	WHERE m.mailbox_id = $1 AND m.modseq = m.created_modseq AND m.uid > coalesce((SELECT uid FROM mail
		WHERE mailbox_id = $1 AND created_modseq <= $2 ORDER BY uid DESC LIMIT 1), 0)
ORDER BY 1`

// Changes lists the messages added or changed and the UIDs expunged
// after sinceModSeq (RFC 7162 CONDSTORE / QRESYNC).
func (s *Store) Changes(ctx context.Context, mailboxID int64, sinceModSeq uint64) (store.Changes, error) {
	var ch store.Changes
	err := s.readMailbox(ctx, mailboxID, func(tx pgx.Tx, mb store.Mailbox) error {
		ch = store.Changes{HighestModSeq: mb.HighestModSeq, UIDNext: mb.UIDNext}
		rows, _ := tx.Query(ctx, changedQ, mailboxID, int64(sinceModSeq))
		var sc metaScan
		if _, err := pgx.ForEachRow(rows, sc.dest(), func() error {
			ch.Updated = append(ch.Updated, sc.meta(mailboxID))
			return nil
		}); err != nil {
			return fmt.Errorf("changes: %w", err)
		}
		var floor int64
		if err := tx.QueryRow(ctx, "SELECT expunged_floor FROM mailboxes WHERE id = $1", mailboxID).Scan(&floor); err != nil {
			return fmt.Errorf("changes: %w", err)
		}
		var err error
		if int64(sinceModSeq) < floor {
			// Tombstones after sinceModSeq were pruned: every UID
			// below UIDNEXT that is not in the mailbox.
			rows, _ := tx.Query(ctx, `SELECT u FROM generate_series(1, $2::bigint - 1) u
				WHERE NOT EXISTS (SELECT 1 FROM mail WHERE mailbox_id = $1 AND uid = u) ORDER BY u`, mailboxID, int64(mb.UIDNext))
			ch.Expunged, err = pgx.CollectRows(rows, pgx.RowTo[uint32])
		} else {
			rows, _ := tx.Query(ctx, "SELECT uid FROM expunged WHERE mailbox_id = $1 AND modseq > $2 ORDER BY uid", mailboxID, int64(sinceModSeq))
			ch.Expunged, err = pgx.CollectRows(rows, pgx.RowTo[uint32])
		}
		if err != nil {
			return fmt.Errorf("changes: %w", err)
		}
		if len(ch.Expunged) == 0 {
			ch.Expunged = nil
		}
		return nil
	})
	return ch, err
}

// OpenBlob returns the raw message bytes of a blob and their size.
func (s *Store) OpenBlob(ctx context.Context, blobID int64) (io.ReadSeekCloser, int64, error) {
	raw, err := s.ReadBlob(ctx, blobID)
	if err != nil {
		return nil, 0, err
	}
	return nopCloser{bytes.NewReader(raw)}, int64(len(raw)), nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// ReadBlob returns the raw message bytes of a blob.
func (s *Store) ReadBlob(ctx context.Context, blobID int64) ([]byte, error) {
	var raw []byte
	err := s.readRow(ctx, "SELECT raw FROM blob_data WHERE blob_id = $1", blobID).Scan(&raw)
	if noRows(err) {
		return nil, fmt.Errorf("blob %d: %w", blobID, store.ErrNotFound)
	}
	if err != nil {
		return nil, storeErr(fmt.Errorf("read blob %d: %w", blobID, err))
	}
	return raw, nil
}
