package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/message"
	"pimail/internal/store"
	"pimail/internal/store/envcodec"
)

// target is one mailbox a message goes to: by ID (Append) or by account
// and name (Deliver, created when missing).
type target struct {
	mailboxID int64
	accountID int64
	name      string // normalised
	flags     store.Flags
	keywords  []string // normalised
}

// newBlob is a message before it is stored: its content address and its
// parse, computed before the transaction.
type newBlob struct {
	sha    []byte
	raw    []byte
	parsed *message.Parsed
}

func prepareBlob(raw []byte, parsed *message.Parsed) *newBlob {
	if parsed == nil || parsed.Body == nil {
		parsed = message.Parse(raw)
	}
	sum := sha256.Sum256(raw)
	return &newBlob{sha: sum[:], raw: raw, parsed: parsed}
}

// Deliver stores one message for many recipients: one blob, one mail row
// per recipient, in one transaction. The whole delivery fails if one
// recipient's account does not exist.
func (s *Store) Deliver(ctx context.Context, d store.Delivery) ([]store.Delivered, error) {
	if len(d.Recipients) == 0 {
		return nil, fmt.Errorf("delivery without recipients: %w", store.ErrInvalid)
	}
	targets := make([]target, len(d.Recipients))
	for i, r := range d.Recipients {
		name := r.Mailbox
		if name == "" {
			name = "INBOX"
		}
		n, err := store.NormalizeMailboxName(name)
		if err != nil {
			return nil, err
		}
		kws, err := store.NormalizeKeywords(r.Keywords)
		if err != nil {
			return nil, err
		}
		targets[i] = target{accountID: r.AccountID, name: n, flags: r.Flags & store.AllFlags, keywords: kws}
	}
	return s.storeMessage(ctx, d.Raw, d.Parsed, d.InternalDate, targets)
}

// Append stores one message into one mailbox (IMAP APPEND, RFC 9051 §6.3.12).
func (s *Store) Append(ctx context.Context, mailboxID int64, raw []byte, flags store.Flags, keywords []string, internalDate time.Time) (store.Delivered, error) {
	kws, err := store.NormalizeKeywords(keywords)
	if err != nil {
		return store.Delivered{}, err
	}
	out, err := s.storeMessage(ctx, raw, nil, internalDate, []target{{mailboxID: mailboxID, flags: flags & store.AllFlags, keywords: kws}})
	if err != nil {
		return store.Delivered{}, err
	}
	return out[0], nil
}

// storeMessage stores the blob and a mail row per target, in the next
// transaction of the batcher (batch.go), and waits for its commit.
func (s *Store) storeMessage(ctx context.Context, raw []byte, parsed *message.Parsed, idate time.Time, targets []target) ([]store.Delivered, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("empty message: %w", store.ErrInvalid)
	}
	if idate.IsZero() {
		idate = time.Now()
	}
	r := &storeReq{ctx: ctx, nb: prepareBlob(raw, parsed), idate: idate.Unix(), targets: targets, done: make(chan error, 1)}
	if err := s.submit(r); err != nil {
		return nil, err
	}
	return r.out, nil
}

// addUsages charges accounts, in ID order.
func addUsages(w *wtx, usage map[int64]int64) error {
	ids := make([]int64, 0, len(usage))
	for id := range usage {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := addUsage(w, id, usage[id]); err != nil {
			return err
		}
	}
	return nil
}

// ensureBlob is ensureBlobs for one blob.
func ensureBlob(w *wtx, nb *newBlob, refs int) (int64, error) {
	ids, err := ensureBlobs(w, []*newBlob{nb}, []int{refs})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// ensureBlobs returns the blob rows for the contents with refs[i]
// references added to the row of nbs[i]: a new row with that count (and
// its data, parse and search text), or as many more on the row of the
// same content stored before. The collector deletes only rows whose
// count is zero, under the row's lock, so the update either finds the
// row and keeps it, or finds it gone and the content is inserted again.
func ensureBlobs(w *wtx, nbs []*newBlob, refs []int) ([]int64, error) {
	type entry struct {
		nb   *newBlob
		refs int
		id   int64
	}
	bySHA := map[string]*entry{}
	var entries []*entry
	for i, nb := range nbs {
		e := bySHA[string(nb.sha)]
		if e == nil {
			e = &entry{nb: nb}
			bySHA[string(nb.sha)] = e
			entries = append(entries, e)
		}
		e.refs += refs[i]
	}
	for range 5 {
		var shas [][]byte
		var sizes []int64
		var counts []int32
		for _, e := range entries {
			if e.id == 0 {
				shas, sizes, counts = append(shas, e.nb.sha), append(sizes, int64(len(e.nb.raw))), append(counts, int32(e.refs))
			}
		}
		if len(shas) == 0 {
			break
		}
		rows, _ := w.query(`INSERT INTO blobs (sha256, size, refcount) SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::integer[])
			ON CONFLICT (sha256) DO NOTHING RETURNING id, sha256`, shas, sizes, counts)
		var id int64
		var sha []byte
		var fresh []*entry
		if _, err := pgx.ForEachRow(rows, []any{&id, &sha}, func() error {
			e := bySHA[string(sha)]
			e.id = id
			fresh = append(fresh, e)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("insert blobs: %w", err)
		}
		var b pgx.Batch
		for _, e := range fresh {
			if err := queueBlobRows(&b, e.id, e.nb); err != nil {
				return nil, err
			}
		}
		if b.Len() > 0 {
			if err := w.SendBatch(w.ctx, &b).Close(); err != nil {
				return nil, fmt.Errorf("insert blob rows: %w", err)
			}
		}
		// The others are stored already: count the references.
		shas, counts = shas[:0], counts[:0]
		for _, e := range entries {
			if e.id == 0 {
				shas, counts = append(shas, e.nb.sha), append(counts, int32(e.refs))
			}
		}
		if len(shas) == 0 {
			break
		}
		rows, _ = w.query(`UPDATE blobs SET refcount = refcount + u.n FROM unnest($1::bytea[], $2::integer[]) AS u(sha, n)
			WHERE blobs.sha256 = u.sha RETURNING blobs.id, blobs.sha256`, shas, counts)
		if _, err := pgx.ForEachRow(rows, []any{&id, &sha}, func() error {
			bySHA[string(sha)].id = id
			return nil
		}); err != nil {
			return nil, fmt.Errorf("count blob references: %w", err)
		}
		// Any left were collected between the two statements: again.
	}
	ids := make([]int64, len(nbs))
	for i, nb := range nbs {
		if ids[i] = bySHA[string(nb.sha)].id; ids[i] == 0 {
			return nil, fmt.Errorf("blob %x: inserted and collected again and again", nb.sha)
		}
	}
	return ids, nil
}

// queueBlobRows queues what a new blob needs besides its row: the bytes,
// the decoded header fields and parse that FETCH and the list views
// read, and the text SEARCH matches.
func queueBlobRows(b *pgx.Batch, id int64, nb *newBlob) error {
	p := nb.parsed
	pj, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode parsed message: %w", err)
	}
	var date *int64 // NULL when the message has no usable Date:
	var offset int
	if !p.Date.IsZero() {
		d := p.Date.Unix()
		date = &d
		_, offset = p.Date.Zone()
	}
	var header []byte
	if p.Body != nil && p.Body.BodyStart >= 0 && p.Body.BodyStart <= int64(len(nb.raw)) {
		header = nb.raw[:p.Body.BodyStart]
	}
	lc := func(s string) []byte { return []byte(strings.ToLower(s)) }
	text := store.ExtractSearchableText(nb.raw, p)
	b.Queue(`INSERT INTO blob_meta (blob_id, subject, from_addr, to_addr, cc_addr, bcc_addr,
		subject_lc, from_lc, to_lc, cc_lc, bcc_lc, date, date_offset, refs, parsed, envelope, header, has_attachment)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
		id, []byte(p.Subject), []byte(p.From), []byte(p.To), []byte(p.Cc), []byte(p.Bcc),
		lc(p.Subject), lc(p.From), lc(p.To), lc(p.Cc), lc(p.Bcc), date, offset,
		[]byte(strings.Join(p.References, " ")), pj, envcodec.Encode(&p.Envelope), nonNil(header), hasAttachment(p))
	b.Queue("INSERT INTO blob_data (blob_id, raw) VALUES ($1, $2)", id, nb.raw)
	b.Queue("INSERT INTO blob_text (blob_id, header, body) VALUES ($1, $2, $3)", id, searchText(text.Header), searchText(text.Body))
	return nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// hasAttachment reports whether a part is an attachment
// (message.Part.IsAttachment), for the webmail's list.
func hasAttachment(p *message.Parsed) bool {
	found := false
	if p.Body != nil {
		p.Body.Walk(func(q *message.Part) bool {
			found = q.IsAttachment()
			return !found
		})
	}
	return found
}

// nulStandIn replaces NUL in the search text, which text columns cannot
// hold: a noncharacter that no search string from a client contains, so
// that a match is found exactly where strings.Contains finds it (a
// needle holds neither NUL nor it, and UTF-8 matches only on character
// boundaries).
const nulStandIn = "\uFFFE"

// searchText is a SearchableText string as blob_text keeps it.
func searchText(s string) string {
	return strings.ReplaceAll(s, "\x00", nulStandIn)
}

// accountExists checks the account inside a transaction.
func accountExists(w *wtx, accountID int64) error {
	var ok bool
	if err := w.queryRow("SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)", accountID).Scan(&ok); err != nil {
		return fmt.Errorf("look up account %d: %w", accountID, err)
	}
	if !ok {
		return fmt.Errorf("account %d: %w", accountID, store.ErrNotFound)
	}
	return nil
}

// AppendBatch stores several messages into one mailbox in one
// transaction (IMAP MULTIAPPEND, RFC 3502: all or none), with
// consecutive UIDs in the order of msgs.
func (s *Store) AppendBatch(ctx context.Context, mailboxID int64, msgs []store.AppendMessage) ([]store.Delivered, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("append batch without messages: %w", store.ErrInvalid)
	}
	reqs := make([]*storeReq, len(msgs))
	now := time.Now()
	for i, m := range msgs {
		if len(m.Raw) == 0 {
			return nil, fmt.Errorf("message %d of %d: empty message: %w", i+1, len(msgs), store.ErrInvalid)
		}
		kws, err := store.NormalizeKeywords(m.Keywords)
		if err != nil {
			return nil, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
		}
		idate := m.InternalDate
		if idate.IsZero() {
			idate = now
		}
		reqs[i] = &storeReq{nb: prepareBlob(m.Raw, nil), idate: idate.Unix(),
			targets: []target{{mailboxID: mailboxID, flags: m.Flags & store.AllFlags, keywords: kws}}}
	}
	if err := s.write(ctx, func(w *wtx) error { return storeBatch(w, reqs) }); err != nil {
		return nil, err
	}
	out := make([]store.Delivered, len(reqs))
	for i, r := range reqs {
		out[i] = r.out[0]
	}
	return out, nil
}
