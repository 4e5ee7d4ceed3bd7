package sqlite

// List views for the webmail (store.Lister): one page of a mailbox by
// position and the counters of all mailboxes of an account, each in one
// indexed query on a statement prepared once per store.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// The page query walks the primary key (mailbox_id, uid) backwards from the
// newest message, so its cost is offset+limit rows, not the mailbox size.
//
// Whether a message has an attachment is in the stored MIME structure
// (JSON). Instead of decoding it, hasAttachment looks for byte patterns.
const pageQuery = `SELECT mail.uid, mail.flags, mail.keywords, mail.internal_date, b.size,
	b.subject, b.from_addr, b.to_addr, b.date, b.date_offset,
	b.parsed
	FROM mail JOIN blobs b ON b.id = mail.blob_id
	WHERE mail.mailbox_id = ? ORDER BY mail.uid DESC LIMIT ? OFFSET ?`

// The counters of all mailboxes of an account in one pass over their rows.
const countsQuery = `SELECT mb.id, mb.account_id, mb.name, mb.special_use,
	EXISTS (SELECT 1 FROM subscriptions s WHERE s.account_id = mb.account_id AND s.name = mb.name),
	mb.uidvalidity, mb.uidnext, mb.highestmodseq,
	count(mail.uid), coalesce(sum(mail.flags & ? = 0), 0)
	FROM mailboxes mb LEFT JOIN mail ON mail.mailbox_id = mb.id
	WHERE mb.account_id = ? GROUP BY mb.id ORDER BY mb.name`

// MailboxPage returns up to limit messages, newest first, after offset.
func (s *Store) MailboxPage(ctx context.Context, mailboxID int64, offset, limit int) ([]store.ListItem, error) {
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("mailbox page offset %d limit %d: %w", offset, limit, store.ErrInvalid)
	}
	if limit == 0 {
		return nil, nil
	}
	st, err := s.rstmts.get(s.ctx, s.rdb, pageQuery)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: prepare mailbox page: %w", err)
	}
	rows, err := st.QueryContext(ctx, mailboxID, limit, offset)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: mailbox page: %w", err)
	}
	return scanListItems(rows, limit)
}

// scanListItems reads the rows of pageQuery (and listItemsQuery), and
// closes them.
func scanListItems(rows *sql.Rows, limit int) ([]store.ListItem, error) {
	defer rows.Close()
	out := make([]store.ListItem, 0, min(limit, 200))
	var (
		kws          string
		idate        int64
		date         sql.NullInt64
		offsetSecs   int64
		parsed       sql.RawBytes
		zs           = zones{}
		subject, frm string
	)
	for rows.Next() {
		var it store.ListItem
		if err := rows.Scan(&it.UID, &it.Flags, &kws, &idate, &it.Size, &subject, &frm, &it.To,
			&date, &offsetSecs, &parsed); err != nil {
			return nil, fmt.Errorf("sqlite store: list rows: %w", err)
		}
		it.Subject, it.From = subject, frm
		it.Keywords = store.SplitKeywords(kws)
		it.InternalDate = time.Unix(idate, 0)
		it.Date = zs.at(date, offsetSecs)
		it.HasAttachment = hasAttachment(parsed)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list rows: %w", err)
	}
	return out, nil
}

var (
	patDispAttachment = []byte(`"disp":"attachment"`)
	patFilename       = []byte(`{"k":"filename"`)
	patName           = []byte(`{"k":"name"`)
)

// hasAttachment tells from a stored MIME structure (message.Parsed as JSON)
// whether a part is an attachment, without decoding it in the common
// cases: a part with Content-Disposition "attachment" is one for sure, and
// a message without any file name parameter has none (IsAttachment needs a
// file name otherwise). Only the rare rest — a named part without that
// disposition — is decoded. The patterns cannot match inside a JSON
// string, where quotes are escaped.
func hasAttachment(pj []byte) bool {
	if bytes.Contains(pj, patDispAttachment) {
		return true
	}
	if !bytes.Contains(pj, patFilename) && !bytes.Contains(pj, patName) {
		return false
	}
	var p struct {
		Body *message.Part `json:"body"`
	}
	if err := json.Unmarshal(pj, &p); err != nil || p.Body == nil {
		return false
	}
	found := false
	p.Body.Walk(func(q *message.Part) bool {
		found = q.IsAttachment()
		return !found
	})
	return found
}

// MailboxCounts returns the account's mailboxes with their counters.
func (s *Store) MailboxCounts(ctx context.Context, accountID int64) ([]store.MailboxCount, error) {
	st, err := s.rstmts.get(s.ctx, s.rdb, countsQuery)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: prepare mailbox counts: %w", err)
	}
	rows, err := st.QueryContext(ctx, store.FlagSeen, accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: mailbox counts: %w", err)
	}
	defer rows.Close()
	var out []store.MailboxCount
	for rows.Next() {
		var c store.MailboxCount
		m := &c.Mailbox
		if err := rows.Scan(&m.ID, &m.AccountID, &m.Name, &m.SpecialUse, &m.Subscribed,
			&m.UIDValidity, &m.UIDNext, &m.HighestModSeq, &c.Messages, &c.Unseen); err != nil {
			return nil, fmt.Errorf("sqlite store: mailbox counts: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: mailbox counts: %w", err)
	}
	return out, nil
}
