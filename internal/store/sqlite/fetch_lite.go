package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
	"pimail/internal/store/envcodec"
)

// The two read paths below serve the commonest IMAP FETCH shapes (a
// client listing a mailbox: ENVELOPE, or the header fields) without what
// Fetch with Parsed costs: decoding the whole MIME tree of every message
// and looking up each message file with its own query. What they need is
// in the narrow blob_fetch table (schema version 5) and in blob_headers
// (version 6): one statement per chunk joins them to the mail rows and
// hands the rows to the aggregate of fetch_agg.go. A blob without a
// blob_fetch row (none are expected: every write path adds one) is served
// from its stored parse, by the transaction-based code further down
// (fetchEnvelopesTx, fetchHeadersTx, fetchLite).

// FetchEnvelopes is Fetch whose Parsed holds only the envelope (RFC 9051
// §7.5.2): Parsed.Body is nil and the decoded search fields are empty.
// The strings of the envelopes share a few large allocations.
func (s *Store) FetchEnvelopes(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, error) {
	metas, _, err := s.fetchEnvelopes(ctx, mailboxID, uids, false)
	return metas, err
}

// FetchEnvelopesBuffered is FetchEnvelopes whose strings live in buffers
// that the caller gives back with release once it is done with the
// envelopes (a FETCH, after formatting a chunk): nothing may use them
// afterwards. release is never nil.
func (s *Store) FetchEnvelopesBuffered(ctx context.Context, mailboxID int64, uids store.UIDSet) (metas []store.MessageMeta, release func(), err error) {
	return s.fetchEnvelopes(ctx, mailboxID, uids, true)
}

func noRelease() {}

func (s *Store) fetchEnvelopes(ctx context.Context, mailboxID int64, uids store.UIDSet, pooled bool) ([]store.MessageMeta, func(), error) {
	k, err := s.fetchRows(ctx, mailboxID, uids, liteEnvelope, pooled)
	if err != nil {
		return nil, noRelease, fmt.Errorf("sqlite store: fetch envelopes: %w", err)
	}
	if len(k.noFetch) > 0 {
		// Blobs without a blob_fetch row (none are expected: every
		// write path adds one): the whole chunk the old way.
		k.release()
		metas, err := s.fetchEnvelopesTx(ctx, mailboxID, uids)
		return metas, noRelease, err
	}
	metas := k.metas
	// Parsed values live in one slice: one allocation per chunk, or
	// none when buffered.
	var (
		parsed []message.Parsed
		addrs  envcodec.Arena
	)
	if b := k.bufs; b != nil {
		if cap(b.parsed) < len(metas) {
			b.parsed = make([]message.Parsed, len(metas))
		}
		parsed = b.parsed[:len(metas)]
		addrs = envcodec.NewArena(b.addrs)
	} else {
		parsed = make([]message.Parsed, len(metas))
	}
	for i := range metas {
		e, err := envcodec.DecodeShared(k.data[i], &addrs)
		if err != nil {
			k.release()
			return nil, noRelease, fmt.Errorf("sqlite store: fetch envelopes: envelope of blob %d: %w", metas[i].BlobID, err)
		}
		parsed[i].Envelope = e
		metas[i].Parsed = &parsed[i]
	}
	if !pooled {
		return metas, noRelease, nil
	}
	return metas, k.release, nil
}

// fetchEnvelopesTx is FetchEnvelopes for chunks with a blob that has no
// blob_fetch row: their envelope comes from the stored parse.
func (s *Store) fetchEnvelopesTx(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, error) {
	tx, _, err := s.readTx(ctx, mailboxID)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var (
		missing map[int64][]int // blob id → indexes in metas
		parsed  []message.Parsed
	)
	metas, err := s.fetchLite(ctx, tx, mailboxID, uids, liteEnvelope, func(i int, m *store.MessageMeta, ok bool, env []byte) error {
		if parsed == nil {
			parsed = make([]message.Parsed, 0, fetchLiteCap)
		}
		if !ok {
			if missing == nil {
				missing = map[int64][]int{}
			}
			missing[m.BlobID] = append(missing[m.BlobID], i)
			parsed = append(parsed, message.Parsed{})
			return nil
		}
		e, err := envcodec.Decode(env)
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
	for i := range metas {
		metas[i].Parsed = &parsed[i]
	}
	return metas, nil
}

// FetchHeaders is Fetch without Parsed, plus each message's header: the
// bytes before its body, blank line included (RFC 5322 §2.1), from
// blob_headers (schema version 6) in the same query as the metadata. A
// message without that row (delivered before version 6) has its header
// read from its file, the first Body.BodyStart bytes with one pread, and
// stored in blob_headers in the background for the next time.
// headers[i] belongs to metas[i]; the headers share a few large buffers,
// which the caller must not change.
func (s *Store) FetchHeaders(ctx context.Context, mailboxID int64, uids store.UIDSet) (metas []store.MessageMeta, headers [][]byte, err error) {
	metas, headers, _, err = s.fetchHeaders(ctx, mailboxID, uids, true, false)
	return metas, headers, err
}

// FetchHeadersBuffered is FetchHeaders whose headers live in buffers that
// the caller gives back with release once it has sent them: nothing may
// use them afterwards. Without withSize, the sizes (MessageMeta.Size) are
// left zero, which spares a lookup per message. release is never nil.
func (s *Store) FetchHeadersBuffered(ctx context.Context, mailboxID int64, uids store.UIDSet, withSize bool) (metas []store.MessageMeta, headers [][]byte, release func(), err error) {
	return s.fetchHeaders(ctx, mailboxID, uids, withSize, true)
}

func (s *Store) fetchHeaders(ctx context.Context, mailboxID int64, uids store.UIDSet, withSize, pooled bool) ([]store.MessageMeta, [][]byte, func(), error) {
	what := liteHeader
	if !withSize {
		what = liteHeaderNoSize
	}
	k, err := s.fetchRows(ctx, mailboxID, uids, what, pooled)
	if err != nil {
		return nil, nil, noRelease, fmt.Errorf("sqlite store: fetch headers: %w", err)
	}
	slow := len(k.noFetch) > 0
	for _, h := range k.data {
		// A header not in blob_headers yet: the whole chunk the old
		// way, which reads it from the file and stores it.
		slow = slow || h == nil
	}
	if slow {
		k.release()
		metas, headers, err := s.fetchHeadersTx(ctx, mailboxID, uids)
		return metas, headers, noRelease, err
	}
	if !pooled {
		return k.metas, k.data, noRelease, nil
	}
	return k.metas, k.data, k.release, nil
}

// fetchHeadersTx is FetchHeaders for chunks with a message whose header
// is not in blob_headers.
func (s *Store) fetchHeadersTx(ctx context.Context, mailboxID int64, uids store.UIDSet) (metas []store.MessageMeta, headers [][]byte, err error) {
	tx, _, err := s.readTx(ctx, mailboxID)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	var (
		buf      []byte
		ends     []int // end of header i in buf; -1: read from the file
		fromFile []int // indexes of the headers read from files
		missing  map[int64][]int
	)
	metas, err = s.fetchLite(ctx, tx, mailboxID, uids, liteHeader, func(i int, m *store.MessageMeta, ok bool, hdr []byte) error {
		if buf == nil {
			buf = make([]byte, 0, 2048*fetchLiteCap)
			ends = make([]int, 0, fetchLiteCap)
		}
		if hdr != nil {
			buf = append(buf, hdr...)
			ends = append(ends, len(buf))
			return nil
		}
		ends = append(ends, -1)
		fromFile = append(fromFile, i)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite store: fetch headers: %w", err)
	}
	// The messages without a stored header: their file and header size.
	shas := make(map[int]string, len(fromFile))
	sizes := make(map[int]int64, len(fromFile)) // -1: no stored structure
	for _, i := range fromFile {
		var sha string
		var hs sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT b.sha256, f.header_size FROM blobs b LEFT JOIN blob_fetch f ON f.blob_id = b.id WHERE b.id = ?",
			metas[i].BlobID).Scan(&sha, &hs); err != nil {
			return nil, nil, fmt.Errorf("sqlite store: fetch headers: blob %d: %w", metas[i].BlobID, err)
		}
		shas[i], sizes[i] = sha, hs.Int64
		if !hs.Valid {
			if missing == nil {
				missing = map[int64][]int{}
			}
			missing[metas[i].BlobID] = append(missing[metas[i].BlobID], i)
		}
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
	headers = make([][]byte, len(metas))
	start := 0
	var fill []blobHeader
	for i, end := range ends {
		if end >= 0 {
			headers[i] = buf[start:end:end]
			start = end
			continue
		}
		n := sizes[i]
		if n == 0 {
			headers[i] = []byte{} // no header at all
			continue
		}
		whole := n < 0
		if whole {
			n = metas[i].Size // no stored structure: cut the header out below
		}
		dst := make([]byte, min(n, metas[i].Size))
		got, err := s.readBlobPrefix(ctx, metas[i].BlobID, shas[i], dst)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlite store: header of blob %d: %w", metas[i].BlobID, err)
		}
		headers[i] = dst[:got]
		if whole {
			headers[i] = dst[:headerLen(dst[:got])]
		} else if got == len(dst) && got > 0 {
			fill = append(fill, blobHeader{metas[i].BlobID, headers[i]})
		}
	}
	if len(fill) > 0 {
		s.fillHeaders(fill)
	}
	return metas, headers, nil
}

// blobHeader is a header read from a file, to be stored in blob_headers.
type blobHeader struct {
	id     int64
	header []byte
}

// fillHeaders stores headers read from files in blob_headers, in the
// background: the FETCH that read them does not wait. A blob collected
// meanwhile gets no row (the insert checks, under the write lock, that
// the blob is still there).
func (s *Store) fillHeaders(hs []blobHeader) {
	go func() {
		// Close lets queued writes finish; after it, write fails at once.
		err := s.write(context.Background(), func(w *wtx) error {
			for _, h := range hs {
				if _, err := w.exec(`INSERT OR IGNORE INTO blob_headers (blob_id, header)
					SELECT ?, ? WHERE EXISTS (SELECT 1 FROM blobs WHERE id = ?)`, h.id, h.header, h.id); err != nil {
					return fmt.Errorf("store header of blob %d: %w", h.id, err)
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errClosed) {
			s.log.Warn("storing message headers for FETCH", "err", err)
		}
	}()
}

// fetchLiteCap is the capacity a chunk's slices start with (imapd asks
// for 256 messages at a time).
const fetchLiteCap = 256

// What fetchLite reads beside the metadata.
const (
	liteEnvelope     = iota // blob_fetch.envelope
	liteHeader              // blob_headers.header
	liteHeaderNoSize        // blob_headers.header, without blob_fetch.size (fetchRows only)
	liteMeta                // nothing beside the metadata (fetchRows only)
)

// fetchLite returns the metadata (without Parsed) of the mailbox's
// messages in uids, in UID order, with one query on mail, blob_fetch and
// (liteHeader) blob_headers, and calls row for each message kept with its
// index, whether it has a blob_fetch row (if not — none are expected —
// the caller reads the stored parse, and the size comes from blobs) and
// the envelope or header (valid only during the call; nil when missing;
// an empty header may read as nil too). Eight columns: each costs the
// driver a few locked calls per row.
func (s *Store) fetchLite(ctx context.Context, tx *sql.Tx, mailboxID int64, uids store.UIDSet, what int,
	row func(i int, m *store.MessageMeta, ok bool, data []byte) error) ([]store.MessageMeta, error) {
	cond, args := uidSetSQL("mail.uid", uids)
	q := "SELECT " + liteCols + ", f.envelope FROM mail LEFT JOIN blob_fetch f ON f.blob_id = mail.blob_id"
	if what == liteHeader {
		q = "SELECT " + liteCols + ", h.header FROM mail LEFT JOIN blob_fetch f ON f.blob_id = mail.blob_id" +
			" LEFT JOIN blob_headers h ON h.blob_id = mail.blob_id"
	}
	q += " WHERE mail.mailbox_id = ? AND " + cond + " ORDER BY mail.uid"
	// Not a statement prepared on the pool: preparing one needs a free
	// pooled connection while this goroutine holds tx's, and with every
	// connection held by a FETCH that waits for another, the store
	// deadlocked (20 IMAP sessions fetching at once).
	rows, err := tx.QueryContext(ctx, q, append([]any{mailboxID}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		metas  = make([]store.MessageMeta, 0, fetchLiteCap)
		kws    sql.RawBytes
		idate  int64
		size   sql.NullInt64
		data   sql.RawBytes
		noSize []int
	)
	for rows.Next() {
		m := store.MessageMeta{MailboxID: mailboxID}
		if err := rows.Scan(&m.UID, &m.ModSeq, &m.Flags, &kws, &idate, &m.BlobID, &size, &data); err != nil {
			return nil, err
		}
		if !inSet(uids, m.UID) {
			continue
		}
		if len(kws) > 0 {
			m.Keywords = store.SplitKeywords(string(kws))
		}
		m.InternalDate = time.Unix(idate, 0)
		m.Size = size.Int64
		if !size.Valid {
			noSize = append(noSize, len(metas))
		}
		metas = append(metas, m)
		if err := row(len(metas)-1, &metas[len(metas)-1], size.Valid, data); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	for _, i := range noSize {
		if err := tx.QueryRowContext(ctx, "SELECT size FROM blobs WHERE id = ?", metas[i].BlobID).Scan(&metas[i].Size); err != nil {
			return nil, fmt.Errorf("blob %d: %w", metas[i].BlobID, err)
		}
	}
	return metas, nil
}

const liteCols = "mail.uid, mail.modseq, mail.flags, mail.keywords, mail.internal_date, mail.blob_id, f.size"

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
