package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
	"pimail/internal/store/envcodec"
)

// maxBlobRetries bounds how often a delivery writes its file again after the
// collector removed an unreferenced file with the same content meanwhile.
const maxBlobRetries = 3

// testSchema, set by tests of the migrations, makes the write paths write
// a database of that schema version: before 5 without the rows of
// blob_fetch, blob_addrs and blob_headers, before 9 without
// mail.created_modseq. 0 is the current version.
var testSchema int

// testBefore reports whether a test set a schema version older than v.
func testBefore(v int) bool { return testSchema != 0 && testSchema < v }

// testHookBlobWritten, when set by a test, runs between writing the file and
// queueing the rows: the window in which the collector may strike.
var testHookBlobWritten func()

// target is one mailbox a message goes to: by ID (Append) or by account and
// name (Deliver, created when missing).
type target struct {
	mailboxID int64
	accountID int64
	name      string // normalised
	flags     store.Flags
	keywords  []string // normalised
}

// newBlob is what a blob row needs, computed before the write request.
type newBlob struct {
	sha    string
	raw    []byte
	size   int64
	parsed *message.Parsed
	json   []byte
}

func prepareBlob(raw []byte, parsed *message.Parsed) (*newBlob, error) {
	if parsed == nil {
		parsed = message.Parse(raw)
	}
	pj, err := json.Marshal(parsed)
	if err != nil {
		return nil, fmt.Errorf("encode parsed message: %w", err)
	}
	return &newBlob{sha: hashRaw(raw), raw: raw, size: int64(len(raw)), parsed: parsed, json: pj}, nil
}

// Deliver stores one message for many recipients: one file, one blob row,
// one mail row per recipient, committed in the writer's next group commit.
// The whole delivery fails if one recipient's account does not exist.
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

// storeMessage writes the file durably in the caller's goroutine, then
// queues the rows for the group commit and waits for it.
func (s *Store) storeMessage(ctx context.Context, raw []byte, parsed *message.Parsed, idate time.Time, targets []target) ([]store.Delivered, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("empty message: %w", store.ErrInvalid)
	}
	if idate.IsZero() {
		idate = time.Now()
	}
	nb, err := prepareBlob(raw, parsed)
	if err != nil {
		return nil, err
	}
	var out []store.Delivered
	for attempt := 0; ; attempt++ {
		if err := s.writeBlob(nb.sha, raw); err != nil {
			return nil, fmt.Errorf("sqlite store: %w", err)
		}
		if testHookBlobWritten != nil {
			testHookBlobWritten()
		}
		err = s.write(ctx, func(w *wtx) error {
			out = make([]store.Delivered, 0, len(targets))
			blobID, err := s.ensureBlob(w, nb, len(targets))
			if err != nil {
				return err
			}
			for _, t := range targets {
				d, err := insertMessage(w, t, blobID, idate.Unix())
				if err != nil {
					return err
				}
				out = append(out, d)
			}
			return nil
		})
		if errors.Is(err, errBlobMissing) && attempt < maxBlobRetries {
			continue
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// ensureBlob returns the blob row for the content with refs references
// added: a new row is inserted with refcount refs, an existing one (the
// same content stored before) gets refs more. It checks, under the write
// lock, that the file is present: only the writer deletes files, so it
// stays until the commit makes the reference count positive. A message
// kept in the database (blobs.go) gets its bytes written with the row.
func (s *Store) ensureBlob(w *wtx, nb *newBlob, refs int) (int64, error) {
	inline := s.inline(len(nb.raw))
	if !inline {
		if err := s.checkBlobFile(nb.sha); err != nil {
			return 0, err
		}
	}
	id, err := s.insertBlob(w, nb, refs, inline)
	if !errors.Is(err, sql.ErrNoRows) {
		return id, err
	}
	// The content is stored already (ON CONFLICT DO NOTHING returned no row).
	if err := w.queryRow("SELECT id FROM blobs WHERE sha256 = ?", nb.sha).Scan(&id); err != nil {
		return 0, fmt.Errorf("look up blob: %w", err)
	}
	if _, err := w.exec("UPDATE blobs SET refcount = refcount + ? WHERE id = ?", refs, id); err != nil {
		return 0, fmt.Errorf("count blob references: %w", err)
	}
	if inline {
		return id, s.keepInline(w, id, nb)
	}
	return id, nil
}

// insertBlob inserts the rows of a new blob with refcount refs (and its
// bytes when inline), or returns sql.ErrNoRows when a blob of the same
// content exists. Inserting first and looking up only on conflict costs
// new content, the common case, one statement less.
func (s *Store) insertBlob(w *wtx, nb *newBlob, refs int, inline bool) (int64, error) {
	p := nb.parsed
	var date any // NULL when the message has no usable Date:
	var offset int
	if !p.Date.IsZero() {
		date = p.Date.Unix()
		_, offset = p.Date.Zone()
	}
	msgID := strings.TrimSpace(p.Envelope.MessageID)
	msgID = strings.TrimSuffix(strings.TrimPrefix(msgID, "<"), ">")
	var id int64
	err := w.queryRow(`INSERT INTO blobs (id, sha256, size, refcount, subject, from_addr, to_addr, cc_addr, bcc_addr,
		date, date_offset, message_id, in_reply_to, refs, parsed)
		VALUES (`+nextIDExpr("blob_last_id")+`, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING RETURNING id`,
		nb.sha, nb.size, refs, p.Subject, p.From, p.To, p.Cc, p.Bcc, date, offset, msgID,
		strings.TrimSpace(p.Envelope.InReplyTo), strings.Join(p.References, " "), nb.json).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("insert blob: %w", err)
	}
	if err := takeID(w, "blob_last_id", id); err != nil {
		return 0, err
	}
	if testBefore(5) {
		return id, nil
	}
	// The narrow rows of the IMAP read paths (schema version 5).
	hs := int64(-1)
	if p.Body != nil {
		hs = p.Body.BodyStart
	}
	if _, err := w.exec("INSERT INTO blob_fetch (blob_id, size, sha256, header_size, envelope) VALUES (?, ?, ?, ?, ?)",
		id, nb.size, nb.sha, hs, envcodec.Encode(&p.Envelope)); err != nil {
		return 0, fmt.Errorf("insert blob fetch row: %w", err)
	}
	if _, err := w.exec("INSERT INTO blob_addrs (blob_id, subject, from_addr, to_addr, cc_addr, bcc_addr) VALUES (?, ?, ?, ?, ?, ?)",
		id, strings.ToLower(p.Subject), strings.ToLower(p.From), strings.ToLower(p.To),
		strings.ToLower(p.Cc), strings.ToLower(p.Bcc)); err != nil {
		return 0, fmt.Errorf("insert blob search row: %w", err)
	}
	if hs >= 0 && hs <= int64(len(nb.raw)) {
		if _, err := w.exec("INSERT INTO blob_headers (blob_id, header) VALUES (?, ?)", id, nb.raw[:hs]); err != nil {
			return 0, fmt.Errorf("insert blob header: %w", err)
		}
	}
	if inline {
		if err := insertBlobData(w, id, nb.raw); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// insertBlobData keeps a message's bytes in the database (blobs.go).
func insertBlobData(w *wtx, id int64, raw []byte) error {
	if _, err := w.exec("INSERT INTO blob_data (blob_id, raw) VALUES (?, ?)", id, raw); err != nil {
		return fmt.Errorf("insert message bytes: %w", err)
	}
	return nil
}

// checkBlobFile reports errBlobMissing when the message file is gone.
func (s *Store) checkBlobFile(sha string) error {
	if _, err := os.Stat(s.blobPath(sha)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errBlobMissing
		}
		return fmt.Errorf("check blob file: %w", err)
	}
	return nil
}

// keepInline makes sure an existing blob row that a new message of inline
// size shares has its bytes somewhere: in blob_data, or in the file an
// older version of pimail (or a larger InlineMax) wrote. When neither
// holds them (the file was collected), the new message's bytes go in.
func (s *Store) keepInline(w *wtx, id int64, nb *newBlob) error {
	var have bool
	if err := w.queryRow("SELECT EXISTS (SELECT 1 FROM blob_data WHERE blob_id = ?)", id).Scan(&have); err != nil {
		return fmt.Errorf("look up message bytes: %w", err)
	}
	if have {
		return nil
	}
	switch err := s.checkBlobFile(nb.sha); {
	case err == nil:
		return nil
	case !errors.Is(err, errBlobMissing):
		return err
	}
	return insertBlobData(w, id, nb.raw)
}

// insertMailQ adds a mail row; its MODSEQ is also its created_modseq
// (schema step 9).
const insertMailQ = "INSERT INTO mail (mailbox_id, uid, modseq, created_modseq, flags, keywords, internal_date, blob_id) VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7)"

// insertMail runs insertMailQ, or its schema 8 form for tests.
func (w *wtx) insertMail(args ...any) error {
	q := insertMailQ
	if testBefore(9) {
		q = "INSERT INTO mail (mailbox_id, uid, modseq, flags, keywords, internal_date, blob_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
	}
	_, err := w.exec(q, args...)
	return err
}

// insertMessage adds one mail row for a target: next UID, next MODSEQ.
func insertMessage(w *wtx, t target, blobID, idate int64) (store.Delivered, error) {
	mb, uid, modseq, err := claimSlot(w, t)
	if errors.Is(err, store.ErrNotFound) && t.mailboxID == 0 {
		if err := accountExists(w, t.accountID); err != nil {
			return store.Delivered{}, err
		}
		if _, err := createMailbox(w, t.accountID, t.name, store.SpecialNone); err != nil {
			return store.Delivered{}, err
		}
		mb, uid, modseq, err = claimSlot(w, t)
	}
	if err != nil {
		return store.Delivered{}, err
	}
	if err := w.insertMail(mb.ID, uid, modseq, t.flags, store.JoinKeywords(t.keywords), idate, blobID); err != nil {
		return store.Delivered{}, fmt.Errorf("insert message: %w", err)
	}
	w.publish(mb.AccountID, mb.ID)
	return store.Delivered{AccountID: mb.AccountID, MailboxID: mb.ID, UIDValidity: mb.UIDValidity, UID: uid}, nil
}

// claimSlot takes the next UID and the next MODSEQ of the target's mailbox
// in one statement and returns the mailbox and the new message's UID (the
// old UIDNEXT: it only grows, RFC 9051 §2.3.1.1) and MODSEQ (the new
// HIGHESTMODSEQ, RFC 7162 §3.1.1): what takeUIDs and nextModSeq do, for
// the path every delivery takes.
func claimSlot(w *wtx, t target) (mb store.Mailbox, uid uint32, modseq uint64, err error) {
	const q = "UPDATE mailboxes SET uidnext = uidnext + 1, highestmodseq = highestmodseq + 1 WHERE "
	const ret = " RETURNING id, account_id, uidvalidity, uidnext, highestmodseq"
	var row *sql.Row
	if t.mailboxID != 0 {
		row = w.queryRow(q+"id = ?"+ret, t.mailboxID)
	} else {
		row = w.queryRow(q+"account_id = ? AND name = ?"+ret, t.accountID, t.name)
	}
	var next int64
	err = row.Scan(&mb.ID, &mb.AccountID, &mb.UIDValidity, &next, &modseq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return mb, 0, 0, fmt.Errorf("mailbox %d %q of account %d: %w", t.mailboxID, t.name, t.accountID, store.ErrNotFound)
	case err != nil:
		return mb, 0, 0, fmt.Errorf("take a uid: %w", err)
	case next > 0xffffffff:
		return mb, 0, 0, fmt.Errorf("mailbox %d: UID space exhausted: %w", mb.ID, store.ErrInvalid)
	}
	return mb, uint32(next - 1), modseq, nil
}
