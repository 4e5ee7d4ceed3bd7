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

// A read of a mailbox's messages is one statement, which sees one
// snapshot, sent without a transaction around it (every round trip
// counts when the database is another process or machine); only when it
// finds no row does a second statement tell an empty mailbox from one
// that does not exist (ErrNotFound).

// readMailbox runs fn, which reads the mailbox's messages with the
// statements of q and returns how many it found.
func (s *Store) readMailbox(ctx context.Context, mailboxID int64, fn func(q querier) (int, error)) error {
	n, err := fn(s.pool)
	if err != nil {
		return storeErr(err)
	}
	if n > 0 {
		return nil
	}
	var ok bool
	if err := s.readRow(ctx, "SELECT EXISTS (SELECT 1 FROM mailboxes WHERE id = $1)", mailboxID).Scan(&ok); err != nil {
		return storeErr(fmt.Errorf("mailbox %d: %w", mailboxID, err))
	}
	if !ok {
		return fmt.Errorf("mailbox %d: %w", mailboxID, store.ErrNotFound)
	}
	return nil
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
// calls fn for each row, ascending UID; it returns the rows read.
func forMessages(ctx context.Context, q querier, mailboxID int64, uids store.UIDSet, extraCols, join string, extra []any, fn func(m store.MessageMeta) error) (int, error) {
	ss := spans(uids)
	p := params{mailboxID}
	cond, _ := uidCond("m.uid", ss, &p)
	rows, _ := q.Query(ctx, "SELECT "+metaCols+extraCols+" FROM mail m JOIN blobs b ON b.id = m.blob_id"+join+
		" WHERE m.mailbox_id = $1 AND "+cond+" ORDER BY m.uid", p...)
	var sc metaScan
	n := 0
	_, err := pgx.ForEachRow(rows, sc.dest(extra...), func() error {
		n++
		if !inSpans(ss, sc.m.UID) {
			return nil
		}
		return fn(sc.meta(mailboxID))
	})
	return n, err
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
	err := s.readMailbox(ctx, mailboxID, func(q querier) (int, error) {
		out = nil
		if !opts.Parsed {
			return forMessages(ctx, q, mailboxID, uids, "", "", nil, func(m store.MessageMeta) error {
				out = append(out, m)
				return nil
			})
		}
		var (
			subject, from, to, cc, bcc, refs, pj []byte
			date                                 *int64
			offset                               int32
		)
		return forMessages(ctx, q, mailboxID, uids,
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
	err := s.readMailbox(ctx, mailboxID, func(q querier) (int, error) {
		out = nil
		var arena envcodec.Arena
		var env []byte
		return forMessages(ctx, q, mailboxID, uids, ", i.envelope", " JOIN blob_meta i ON i.blob_id = m.blob_id", []any{&env},
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
	err := s.readMailbox(ctx, mailboxID, func(q querier) (int, error) {
		out, headers = nil, nil
		var h []byte
		return forMessages(ctx, q, mailboxID, uids, ", i.header", " JOIN blob_meta i ON i.blob_id = m.blob_id", []any{&h},
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

// changesQ answers Changes in one statement, which sees one snapshot:
// the mailbox's counters (kind 0), the messages of mailbox $1 whose
// MODSEQ is above $2 (kind 1) and the UIDs expunged after $2 (kind 2).
// The messages come in two parts: those changed since their creation,
// from the partial index that holds just them, and the unchanged ones
// created after $2, the UIDs above the last message created at or before
// it (UIDs and creation MODSEQs grow together). When tombstones after $2
// were pruned (pruneTombstones), every UID below UIDNEXT that is not in
// the mailbox counts as expunged.
const changesQ = `WITH mb AS (SELECT uidnext, highestmodseq, expunged_floor FROM mailboxes WHERE id = $1)
SELECT 0 AS kind, uidnext AS a, highestmodseq AS b, 0 AS c, '' AS d, 0::bigint AS e, 0::bigint AS f, 0::bigint AS g FROM mb
UNION ALL
SELECT 1, ` + metaCols + ` FROM mail m JOIN blobs b ON b.id = m.blob_id
	WHERE m.mailbox_id = $1 AND m.modseq > $2 AND m.modseq <> m.created_modseq
UNION ALL
SELECT 1, ` + metaCols + ` FROM mail m JOIN blobs b ON b.id = m.blob_id
	WHERE m.mailbox_id = $1 AND m.modseq = m.created_modseq AND m.uid > coalesce((SELECT uid FROM mail
		WHERE mailbox_id = $1 AND created_modseq <= $2 ORDER BY uid DESC LIMIT 1), 0)
UNION ALL
SELECT 2, uid, 0, 0, '', 0, 0, 0 FROM expunged
	WHERE mailbox_id = $1 AND modseq > $2 AND $2 >= (SELECT expunged_floor FROM mb)
UNION ALL
SELECT 2, u, 0, 0, '', 0, 0, 0 FROM generate_series(1, (SELECT uidnext FROM mb) - 1) u
	WHERE $2 < (SELECT expunged_floor FROM mb) AND NOT EXISTS (SELECT 1 FROM mail WHERE mailbox_id = $1 AND uid = u)
ORDER BY 1, 2`

// Changes lists the messages added or changed and the UIDs expunged
// after sinceModSeq (RFC 7162 CONDSTORE / QRESYNC).
func (s *Store) Changes(ctx context.Context, mailboxID int64, sinceModSeq uint64) (store.Changes, error) {
	var ch store.Changes
	rows, _ := s.pool.Query(ctx, changesQ, mailboxID, int64(sinceModSeq))
	var (
		kind  int
		sc    metaScan
		found bool
	)
	_, err := pgx.ForEachRow(rows, append([]any{&kind}, sc.dest()...), func() error {
		switch kind {
		case 0:
			found = true
			ch.UIDNext, ch.HighestModSeq = sc.m.UID, sc.m.ModSeq
		case 1:
			ch.Updated = append(ch.Updated, sc.meta(mailboxID))
		case 2:
			ch.Expunged = append(ch.Expunged, sc.m.UID)
		}
		return nil
	})
	if err != nil {
		return store.Changes{}, storeErr(fmt.Errorf("changes: %w", err))
	}
	if !found {
		return store.Changes{}, fmt.Errorf("mailbox %d: %w", mailboxID, store.ErrNotFound)
	}
	return ch, nil
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
