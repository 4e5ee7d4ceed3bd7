package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// The two read paths below serve the commonest IMAP FETCH shapes (a
// client listing a mailbox: ENVELOPE, or the header fields) without what
// Fetch with Parsed costs: decoding the whole MIME tree of every message
// and looking up each message file with its own query.

// FetchEnvelopes is Fetch whose Parsed holds only the envelope (RFC 9051
// §7.5.2): Parsed.Body is nil and the decoded search fields are empty.
// Only the start of the stored JSON is decoded.
func (s *Store) FetchEnvelopes(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, error) {
	var out []store.MessageMeta
	err := s.fetchLite(ctx, mailboxID, uids, func(m *store.MessageMeta, _ string, pj []byte) error {
		env, err := decodeEnvelope(pj)
		if err != nil {
			return fmt.Errorf("decode envelope of blob %d: %w", m.BlobID, err)
		}
		m.Parsed = &message.Parsed{Envelope: env}
		out = append(out, *m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite store: fetch envelopes: %w", err)
	}
	return out, nil
}

// FetchHeaders is Fetch without Parsed, plus each message's header: the
// bytes before its body, blank line included (RFC 5322 §2.1), that is
// the first Body.BodyStart bytes of the message file, read with one pread.
// headers[i] belongs to metas[i]; all headers share one buffer.
func (s *Store) FetchHeaders(ctx context.Context, mailboxID int64, uids store.UIDSet) (metas []store.MessageMeta, headers [][]byte, err error) {
	type want struct {
		sha   string
		n     int64
		whole bool // no stored header size
	}
	var wants []want
	var total int64
	err = s.fetchLite(ctx, mailboxID, uids, func(m *store.MessageMeta, sha string, pj []byte) error {
		n, err := decodeBodyStart(pj)
		if err != nil {
			return fmt.Errorf("decode header size of blob %d: %w", m.BlobID, err)
		}
		whole := n < 0
		if whole {
			n = m.Size // no stored structure: cut the header out below
		}
		n = min(n, m.Size)
		metas = append(metas, *m)
		wants = append(wants, want{sha, n, whole})
		total += n
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite store: fetch headers: %w", err)
	}
	buf := make([]byte, total)
	headers = make([][]byte, len(wants))
	var off int64
	for i, w := range wants {
		dst := buf[off : off+w.n : off+w.n]
		got, err := readPrefix(s.blobPath(w.sha), dst)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlite store: header of blob %d: %w", metas[i].BlobID, err)
		}
		headers[i] = dst[:got]
		if w.whole {
			headers[i] = dst[:headerLen(dst[:got])]
		}
		off += w.n
	}
	return metas, headers, nil
}

// fetchLite runs one query over the mailbox's messages in uids, in UID
// order, and calls fn with each message's metadata (m is reused between
// calls), the content address of its file and its stored parse (JSON,
// valid only during the call).
func (s *Store) fetchLite(ctx context.Context, mailboxID int64, uids store.UIDSet, fn func(m *store.MessageMeta, sha string, parsed []byte) error) error {
	tx, _, err := s.readTx(ctx, mailboxID)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	cond, args := uidSetSQL("mail.uid", uids)
	q := "SELECT " + metaCols + ", b.sha256, b.parsed FROM mail JOIN blobs b ON b.id = mail.blob_id WHERE mail.mailbox_id = ? AND " +
		cond + " ORDER BY mail.uid"
	rows, err := tx.QueryContext(ctx, q, append([]any{mailboxID}, args...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		m     store.MessageMeta
		kws   string
		idate int64
		sha   string
		pj    sql.RawBytes
	)
	for rows.Next() {
		m = store.MessageMeta{MailboxID: mailboxID}
		if err := rows.Scan(&m.UID, &m.ModSeq, &m.Flags, &kws, &idate, &m.BlobID, &m.Size, &sha, &pj); err != nil {
			return err
		}
		if !inSet(uids, m.UID) {
			continue
		}
		m.Keywords = splitKeywords(kws)
		m.InternalDate = time.Unix(idate, 0)
		if err := fn(&m, sha, pj); err != nil {
			return err
		}
	}
	return rows.Err()
}
