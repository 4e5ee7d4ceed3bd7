package postgres

import (
	"cmp"
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

// storeMessage stores the blob and a mail row per target in one
// transaction. The blob goes first, so that a mailbox is locked only for
// the few statements of its rows; mailboxes are locked in (account,
// name) order.
func (s *Store) storeMessage(ctx context.Context, raw []byte, parsed *message.Parsed, idate time.Time, targets []target) ([]store.Delivered, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("empty message: %w", store.ErrInvalid)
	}
	if idate.IsZero() {
		idate = time.Now()
	}
	nb := prepareBlob(raw, parsed)
	order := make([]int, len(targets))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ta, tb := targets[a], targets[b]
		return cmp.Or(cmp.Compare(ta.accountID, tb.accountID), cmp.Compare(ta.name, tb.name), cmp.Compare(ta.mailboxID, tb.mailboxID))
	})
	out := make([]store.Delivered, len(targets))
	err := s.write(ctx, func(w *wtx) error {
		blobID, err := ensureBlob(w, nb, len(targets))
		if err != nil {
			return err
		}
		usage := map[int64]int64{}
		for _, i := range order {
			d, err := insertMessage(w, targets[i], blobID, idate.Unix())
			if err != nil {
				return err
			}
			out[i] = d
			usage[d.AccountID] += int64(len(raw))
		}
		return addUsages(w, usage)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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

// ensureBlob returns the blob row for the content with refs references
// added: a new row with refcount refs (and its data, parse and search
// text), or refs more on the row of the same content stored before. The
// collector deletes only rows whose count is zero, under the row's lock,
// so the update either finds the row and keeps it, or finds it gone and
// the content is inserted again.
func ensureBlob(w *wtx, nb *newBlob, refs int) (int64, error) {
	for range 5 {
		var id int64
		err := w.queryRow("INSERT INTO blobs (sha256, size, refcount) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING RETURNING id",
			nb.sha, len(nb.raw), refs).Scan(&id)
		if err == nil {
			return id, insertBlobRows(w, id, nb)
		}
		if !noRows(err) {
			return 0, fmt.Errorf("insert blob: %w", err)
		}
		err = w.queryRow("UPDATE blobs SET refcount = refcount + $1 WHERE sha256 = $2 RETURNING id", refs, nb.sha).Scan(&id)
		if err == nil {
			return id, nil
		}
		if !noRows(err) {
			return 0, fmt.Errorf("count blob references: %w", err)
		}
		// Collected between the two statements: insert it again.
	}
	return 0, fmt.Errorf("blob %x: inserted and collected again and again", nb.sha)
}

// insertBlobRows writes what a new blob needs besides its row, in one
// round trip: the bytes, the decoded header fields and parse that FETCH
// and the list views read, and the text SEARCH matches.
func insertBlobRows(w *wtx, id int64, nb *newBlob) error {
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
	var b pgx.Batch
	b.Queue(`INSERT INTO blob_meta (blob_id, subject, from_addr, to_addr, cc_addr, bcc_addr,
		subject_lc, from_lc, to_lc, cc_lc, bcc_lc, date, date_offset, refs, parsed, envelope, header, has_attachment)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
		id, []byte(p.Subject), []byte(p.From), []byte(p.To), []byte(p.Cc), []byte(p.Bcc),
		lc(p.Subject), lc(p.From), lc(p.To), lc(p.Cc), lc(p.Bcc), date, offset,
		[]byte(strings.Join(p.References, " ")), pj, envcodec.Encode(&p.Envelope), nonNil(header), hasAttachment(p))
	b.Queue("INSERT INTO blob_data (blob_id, raw) VALUES ($1, $2)", id, nb.raw)
	b.Queue("INSERT INTO blob_text (blob_id, header, body) VALUES ($1, $2, $3)", id, searchText(text.Header), searchText(text.Body))
	if err := w.SendBatch(w.ctx, &b).Close(); err != nil {
		return fmt.Errorf("insert blob %d: %w", id, err)
	}
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

// insertMessage adds one mail row for a target: next UID, next MODSEQ.
func insertMessage(w *wtx, t target, blobID, idate int64) (store.Delivered, error) {
	mb, uid, modseq, err := claimSlot(w, t)
	if isNotFound(err) && t.mailboxID == 0 {
		if err := accountExists(w, t.accountID); err != nil {
			return store.Delivered{}, err
		}
		if _, err := createMailbox(w, t.accountID, t.name, store.SpecialNone); err != nil && !isExists(err) {
			return store.Delivered{}, err
		}
		mb, uid, modseq, err = claimSlot(w, t)
	}
	if err != nil {
		return store.Delivered{}, err
	}
	if _, err := w.exec(`INSERT INTO mail (mailbox_id, uid, modseq, created_modseq, flags, keywords, internal_date, blob_id)
		VALUES ($1, $2, $3, $3, $4, $5, $6, $7)`,
		mb.ID, uid, modseq, int32(t.flags), store.JoinKeywords(t.keywords), idate, blobID); err != nil {
		return store.Delivered{}, fmt.Errorf("insert message: %w", err)
	}
	w.publish(mb.AccountID, mb.ID)
	return store.Delivered{AccountID: mb.AccountID, MailboxID: mb.ID, UIDValidity: mb.UIDValidity, UID: uid}, nil
}

// claimSlot takes the next UID and the next MODSEQ of the target's
// mailbox in one statement, which also locks the mailbox until the
// commit: the new message's UID is the old UIDNEXT (RFC 9051 §2.3.1.1),
// its MODSEQ the new HIGHESTMODSEQ (RFC 7162 §3.1.1).
func claimSlot(w *wtx, t target) (mb store.Mailbox, uid uint32, modseq uint64, err error) {
	const q = "UPDATE mailboxes SET uidnext = uidnext + 1, highestmodseq = highestmodseq + 1 WHERE "
	const ret = " RETURNING id, account_id, uidvalidity, uidnext, highestmodseq"
	var row pgx.Row
	if t.mailboxID != 0 {
		row = w.queryRow(q+"id = $1"+ret, t.mailboxID)
	} else {
		row = w.queryRow(q+"account_id = $1 AND name = $2"+ret, t.accountID, t.name)
	}
	var next int64
	err = row.Scan(&mb.ID, &mb.AccountID, &mb.UIDValidity, &next, &modseq)
	switch {
	case noRows(err):
		return mb, 0, 0, fmt.Errorf("mailbox %d %q of account %d: %w", t.mailboxID, t.name, t.accountID, store.ErrNotFound)
	case err != nil:
		return mb, 0, 0, fmt.Errorf("take a uid: %w", err)
	case next > maxUID+1:
		return mb, 0, 0, fmt.Errorf("mailbox %d: UID space exhausted: %w", mb.ID, store.ErrInvalid)
	}
	return mb, uint32(next - 1), modseq, nil
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
// consecutive UIDs in the order of msgs and one MODSEQ.
func (s *Store) AppendBatch(ctx context.Context, mailboxID int64, msgs []store.AppendMessage) ([]store.Delivered, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("append batch without messages: %w", store.ErrInvalid)
	}
	rows := make([]mailRow, len(msgs))
	nbs := make([]*newBlob, len(msgs))
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
		rows[i] = mailRow{flags: m.Flags & store.AllFlags, keywords: kws, idate: idate.Unix(), size: int64(len(m.Raw))}
		nbs[i] = prepareBlob(m.Raw, nil)
	}
	var out []store.Delivered
	err := s.write(ctx, func(w *wtx) error {
		for i, nb := range nbs {
			var err error
			if rows[i].blobID, err = ensureBlob(w, nb, 1); err != nil {
				return err
			}
		}
		mb, err := lockMailbox(w, mailboxID, 0, "")
		if err != nil {
			return err
		}
		res, err := insertMail(w, rows, mb)
		if err != nil {
			return err
		}
		var size int64
		for _, r := range rows {
			size += r.size
		}
		if err := addUsage(w, mb.AccountID, size); err != nil {
			return err
		}
		out = make([]store.Delivered, 0, len(rows))
		for _, uid := range res.DestUIDs {
			out = append(out, store.Delivered{AccountID: mb.AccountID, MailboxID: mb.ID, UIDValidity: mb.UIDValidity, UID: uid})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
