package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// The two read paths below serve the commonest IMAP FETCH shapes (a
// client listing a mailbox: ENVELOPE, or the header fields) without what
// Fetch with Parsed costs: decoding the whole MIME tree of every message
// and looking up each message file with its own query. What they need is
// in the narrow blob_fetch table (schema version 5): one query per chunk
// joins it to the mail rows. A blob without a blob_fetch row (none are
// expected: every write path adds one) is served from its stored parse.

// FetchEnvelopes is Fetch whose Parsed holds only the envelope (RFC 9051
// §7.5.2): Parsed.Body is nil and the decoded search fields are empty.
func (s *Store) FetchEnvelopes(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, error) {
	tx, _, err := s.readTx(ctx, mailboxID)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var (
		missing map[int64][]int // blob id → indexes in metas
		parsed  []message.Parsed
	)
	metas, _, err := fetchLite(ctx, tx, mailboxID, uids, true, func(i int, m *store.MessageMeta, _ string, _ int64, env []byte) error {
		if parsed == nil {
			parsed = make([]message.Parsed, 0, fetchLiteCap)
		}
		if env == nil {
			if missing == nil {
				missing = map[int64][]int{}
			}
			missing[m.BlobID] = append(missing[m.BlobID], i)
			parsed = append(parsed, message.Parsed{})
			return nil
		}
		e, err := decodeCompactEnvelope(env)
		if err != nil {
			return fmt.Errorf("envelope of blob %d: %w", m.BlobID, err)
		}
		parsed = append(parsed, message.Parsed{Envelope: e})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite store: fetch envelopes: %w", err)
	}
	err = storedParses(ctx, tx, missing, func(is []int, pj []byte) error {
		env, err := decodeEnvelope(pj)
		if err != nil {
			return fmt.Errorf("decode envelope of blob %d: %w", metas[is[0]].BlobID, err)
		}
		for _, i := range is {
			parsed[i].Envelope = env
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite store: fetch envelopes: %w", err)
	}
	// Parsed values live in one slice: one allocation per chunk.
	for i := range metas {
		metas[i].Parsed = &parsed[i]
	}
	return metas, nil
}

// FetchHeaders is Fetch without Parsed, plus each message's header: the
// bytes before its body, blank line included (RFC 5322 §2.1), that is
// the first Body.BodyStart bytes of the message file, read with one pread.
// headers[i] belongs to metas[i]; all headers share one buffer.
func (s *Store) FetchHeaders(ctx context.Context, mailboxID int64, uids store.UIDSet) (metas []store.MessageMeta, headers [][]byte, err error) {
	tx, _, err := s.readTx(ctx, mailboxID)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	var sizes []int64 // -1: no stored structure
	missing := map[int64][]int{}
	metas, shas, err := fetchLite(ctx, tx, mailboxID, uids, false, func(i int, m *store.MessageMeta, _ string, hs int64, env []byte) error {
		if env == nil {
			missing[m.BlobID] = append(missing[m.BlobID], i)
		}
		sizes = append(sizes, hs)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite store: fetch headers: %w", err)
	}
	err = storedParses(ctx, tx, missing, func(is []int, pj []byte) error {
		n, err := decodeBodyStart(pj)
		if err != nil {
			return fmt.Errorf("decode header size of blob %d: %w", metas[is[0]].BlobID, err)
		}
		for _, i := range is {
			sizes[i] = n
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite store: fetch headers: %w", err)
	}
	tx.Rollback() // the files need no transaction
	var total int64
	for i, n := range sizes {
		if n < 0 {
			total += metas[i].Size // no stored structure: cut the header out below
			continue
		}
		sizes[i] = min(n, metas[i].Size)
		total += sizes[i]
	}
	buf := make([]byte, total)
	headers = make([][]byte, len(metas))
	var off int64
	for i, n := range sizes {
		whole := n < 0
		if whole {
			n = metas[i].Size
		}
		dst := buf[off : off+n : off+n]
		got, err := readPrefix(s.blobPath(shas[i]), dst)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlite store: header of blob %d: %w", metas[i].BlobID, err)
		}
		headers[i] = dst[:got]
		if whole {
			headers[i] = dst[:headerLen(dst[:got])]
		}
		off += n
	}
	return metas, headers, nil
}

// fetchLiteCap is the capacity a chunk's slices start with (imapd asks
// for 256 messages at a time).
const fetchLiteCap = 256

// fetchLite returns the metadata (without Parsed) and the content
// addresses of the mailbox's messages in uids, in UID order, with one
// query on mail and blob_fetch, and calls row for each message kept with
// its index, header size and compact envelope (valid only during the
// call; empty unless withEnv; nil when the blob has no blob_fetch row:
// the caller then reads the stored parse, and the size and address come
// from blobs).
func fetchLite(ctx context.Context, tx *sql.Tx, mailboxID int64, uids store.UIDSet, withEnv bool,
	row func(i int, m *store.MessageMeta, sha string, headerSize int64, env []byte) error) ([]store.MessageMeta, []string, error) {
	cond, args := uidSetSQL("mail.uid", uids)
	cols := liteCols + ", x''" // the driver copies a blob: none when not needed
	if withEnv {
		cols = liteCols + ", f.envelope"
	}
	q := "SELECT " + cols + " FROM mail LEFT JOIN blob_fetch f ON f.blob_id = mail.blob_id WHERE mail.mailbox_id = ? AND " +
		cond + " ORDER BY mail.uid"
	rows, err := tx.QueryContext(ctx, q, append([]any{mailboxID}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		metas  = make([]store.MessageMeta, 0, fetchLiteCap)
		shas   = make([]string, 0, fetchLiteCap)
		kws    sql.RawBytes
		idate  int64
		size   sql.NullInt64
		sha    sql.NullString
		hs     sql.NullInt64
		env    sql.RawBytes
		noSize []int
	)
	for rows.Next() {
		m := store.MessageMeta{MailboxID: mailboxID}
		if err := rows.Scan(&m.UID, &m.ModSeq, &m.Flags, &kws, &idate, &m.BlobID, &size, &sha, &hs, &env); err != nil {
			return nil, nil, err
		}
		if !inSet(uids, m.UID) {
			continue
		}
		if len(kws) > 0 {
			m.Keywords = splitKeywords(string(kws))
		}
		m.InternalDate = time.Unix(idate, 0)
		m.Size = size.Int64
		var e []byte
		if size.Valid {
			e = env
			if e == nil {
				e = []byte{}
			}
		} else {
			noSize = append(noSize, len(metas))
		}
		metas = append(metas, m)
		shas = append(shas, sha.String)
		if err := row(len(metas)-1, &metas[len(metas)-1], sha.String, hs.Int64, e); err != nil {
			return nil, nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows.Close()
	for _, i := range noSize {
		if err := tx.QueryRowContext(ctx, "SELECT size, sha256 FROM blobs WHERE id = ?", metas[i].BlobID).Scan(&metas[i].Size, &shas[i]); err != nil {
			return nil, nil, fmt.Errorf("blob %d: %w", metas[i].BlobID, err)
		}
	}
	return metas, shas, nil
}

const liteCols = "mail.uid, mail.modseq, mail.flags, mail.keywords, mail.internal_date, mail.blob_id, f.size, f.sha256, f.header_size"

// storedParses reads the stored parse (JSON) of the blobs in missing and
// calls fn with the indexes mapped to each and the JSON, valid only
// during the call.
func storedParses(ctx context.Context, tx *sql.Tx, missing map[int64][]int, fn func(is []int, parsed []byte) error) error {
	ids := make([]any, 0, len(missing))
	for id := range missing {
		ids = append(ids, id)
	}
	const batch = 500 // bound parameters per statement
	for lo := 0; lo < len(ids); lo += batch {
		part := ids[lo:min(lo+batch, len(ids))]
		q := "SELECT id, parsed FROM blobs WHERE id IN (?" + strings.Repeat(",?", len(part)-1) + ")"
		if err := eachParse(ctx, tx, q, part, missing, fn); err != nil {
			return err
		}
	}
	return nil
}

func eachParse(ctx context.Context, tx *sql.Tx, q string, args []any, missing map[int64][]int, fn func(is []int, parsed []byte) error) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var id int64
	var pj sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&id, &pj); err != nil {
			return err
		}
		if err := fn(missing[id], pj); err != nil {
			return err
		}
	}
	return rows.Err()
}
