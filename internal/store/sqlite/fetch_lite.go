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
// and looking up each message file with its own query. What they need
// from the stored parse (the envelope, the header size) is decoded once
// per message content and kept in fetchCache; the stored parse is read
// only for the messages missing there.

// FetchEnvelopes is Fetch whose Parsed holds only the envelope (RFC 9051
// §7.5.2): Parsed.Body is nil and the decoded search fields are empty.
// The envelopes may be shared with other callers: do not modify them.
func (s *Store) FetchEnvelopes(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, error) {
	tx, _, err := s.readTx(ctx, mailboxID)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	metas, shas, err := fetchLite(ctx, tx, mailboxID, uids)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: fetch envelopes: %w", err)
	}
	missing := map[int64][]int{} // blob id → indexes in metas
	for i := range metas {
		if e := fetchCache.envelope(shas[i]); e != nil {
			metas[i].Parsed = &message.Parsed{Envelope: *e}
		} else {
			missing[metas[i].BlobID] = append(missing[metas[i].BlobID], i)
		}
	}
	err = storedParses(ctx, tx, missing, func(is []int, pj []byte) error {
		env, err := decodeEnvelope(pj)
		if err != nil {
			return fmt.Errorf("decode envelope of blob %d: %w", metas[is[0]].BlobID, err)
		}
		fetchCache.putEnvelope(shas[is[0]], &env)
		for _, i := range is {
			metas[i].Parsed = &message.Parsed{Envelope: env}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite store: fetch envelopes: %w", err)
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
	metas, shas, err := fetchLite(ctx, tx, mailboxID, uids)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite store: fetch headers: %w", err)
	}
	sizes := make([]int64, len(metas)) // -1: no stored structure
	missing := map[int64][]int{}
	for i := range metas {
		if n, ok := fetchCache.bodyStart(shas[i]); ok {
			sizes[i] = n
		} else {
			missing[metas[i].BlobID] = append(missing[metas[i].BlobID], i)
		}
	}
	err = storedParses(ctx, tx, missing, func(is []int, pj []byte) error {
		n, err := decodeBodyStart(pj)
		if err != nil {
			return fmt.Errorf("decode header size of blob %d: %w", metas[is[0]].BlobID, err)
		}
		fetchCache.putBodyStart(shas[is[0]], n)
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

// fetchLite returns the metadata (without Parsed) and the content
// addresses of the mailbox's messages in uids, in UID order, with one
// query.
func fetchLite(ctx context.Context, tx *sql.Tx, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, []string, error) {
	cond, args := uidSetSQL("mail.uid", uids)
	q := "SELECT " + metaCols + ", b.sha256 FROM mail JOIN blobs b ON b.id = mail.blob_id WHERE mail.mailbox_id = ? AND " +
		cond + " ORDER BY mail.uid"
	rows, err := tx.QueryContext(ctx, q, append([]any{mailboxID}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		metas []store.MessageMeta
		shas  []string
		kws   string
		idate int64
		sha   string
	)
	for rows.Next() {
		m := store.MessageMeta{MailboxID: mailboxID}
		if err := rows.Scan(&m.UID, &m.ModSeq, &m.Flags, &kws, &idate, &m.BlobID, &m.Size, &sha); err != nil {
			return nil, nil, err
		}
		if !inSet(uids, m.UID) {
			continue
		}
		m.Keywords = splitKeywords(kws)
		m.InternalDate = time.Unix(idate, 0)
		metas = append(metas, m)
		shas = append(shas, sha)
	}
	return metas, shas, rows.Err()
}

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
