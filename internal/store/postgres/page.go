package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// List views for the webmail (store.Lister), each one indexed query.

// MailboxPage returns up to limit messages, newest first, after offset:
// the primary key (mailbox_id, uid) walked backwards, so the cost is
// offset+limit rows, not the mailbox size.
func (s *Store) MailboxPage(ctx context.Context, mailboxID int64, offset, limit int) ([]store.ListItem, error) {
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("mailbox page offset %d limit %d: %w", offset, limit, store.ErrInvalid)
	}
	if limit == 0 {
		return nil, nil
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+listItemCols+`
		FROM mail m JOIN blobs b ON b.id = m.blob_id JOIN blob_meta i ON i.blob_id = m.blob_id
		WHERE m.mailbox_id = $1 ORDER BY m.uid DESC LIMIT $2 OFFSET $3`, mailboxID, limit, offset)
	out, err := scanListItems(rows, limit)
	if err != nil {
		return nil, storeErr(fmt.Errorf("mailbox page: %w", err))
	}
	return out, nil
}

// listItemCols are the columns of a list row, from mail m, blobs b and
// blob_meta i, as scanListItems reads them.
const listItemCols = `m.uid, m.flags, m.keywords, m.internal_date, b.size,
	i.subject, i.from_addr, i.to_addr, i.date, i.date_offset, i.has_attachment`

// scanListItems reads the rows of a query of listItemCols.
func scanListItems(rows pgx.Rows, limit int) ([]store.ListItem, error) {
	out := make([]store.ListItem, 0, min(limit, 200))
	var (
		it                store.ListItem
		kws               string
		idate             int64
		date              *int64
		offsetSecs        int32
		subject, from, to []byte
		zs                = zones{}
	)
	_, err := pgx.ForEachRow(rows, []any{&it.UID, &it.Flags, &kws, &idate, &it.Size, &subject, &from, &to, &date, &offsetSecs, &it.HasAttachment}, func() error {
		item := it
		item.Subject, item.From, item.To = string(subject), string(from), string(to)
		item.Keywords = store.SplitKeywords(kws)
		item.InternalDate = time.Unix(idate, 0)
		item.Date = zs.at(date, offsetSecs)
		out = append(out, item)
		return nil
	})
	return out, err
}

// zones shares the fixed zones of Date fields within one query.
type zones map[int32]*time.Location

// at is the Date field at unix (nil: none) in its zone.
func (z zones) at(unix *int64, offset int32) time.Time {
	if unix == nil {
		return time.Time{}
	}
	loc, ok := z[offset]
	if !ok {
		loc = time.FixedZone("", int(offset))
		z[offset] = loc
	}
	return time.Unix(*unix, 0).In(loc)
}

// MailboxCounts returns the account's mailboxes with their counters, in
// one pass over their rows.
func (s *Store) MailboxCounts(ctx context.Context, accountID int64) ([]store.MailboxCount, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+mailboxCols+`, c.n, c.unseen FROM mailboxes,
		LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE flags & $1 = 0) AS unseen FROM mail WHERE mailbox_id = mailboxes.id) c
		WHERE account_id = $2 ORDER BY name`, store.FlagSeen, accountID)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.MailboxCount, error) {
		var c store.MailboxCount
		m := &c.Mailbox
		err := r.Scan(&m.ID, &m.AccountID, &m.Name, &m.SpecialUse, &m.Subscribed,
			&m.UIDValidity, &m.UIDNext, &m.HighestModSeq, &m.FirstRecentUID, &c.Messages, &c.Unseen)
		return c, err
	})
	if err != nil {
		return nil, storeErr(fmt.Errorf("mailbox counts: %w", err))
	}
	return out, nil
}
