package sqlite

// Sorting and threading a message list (store.ListSorter): the keys of a
// whole mailbox from the index columns of blobs, without decoding the
// stored MIME structure, and the rows of one page by UID.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"pimail/internal/store"
)

const sortKeysQuery = `SELECT mail.uid, mail.internal_date, b.size, b.subject, b.from_addr, b.to_addr,
	b.date, b.date_offset, b.message_id, b.in_reply_to, b.refs
	FROM mail JOIN blobs b ON b.id = mail.blob_id
	WHERE mail.mailbox_id = ? ORDER BY mail.uid`

// listItemsQuery is pageQuery for a set of UIDs, given as a JSON array.
const listItemsQuery = `SELECT mail.uid, mail.flags, mail.keywords, mail.internal_date, b.size,
	b.subject, b.from_addr, b.to_addr, b.date, b.date_offset,
	b.parsed
	FROM mail JOIN blobs b ON b.id = mail.blob_id
	WHERE mail.mailbox_id = ? AND mail.uid IN (SELECT value FROM json_each(?)) ORDER BY mail.uid`

// zones shares the fixed zones of Date fields within one query.
type zones map[int64]*time.Location

func (z zones) at(unix sql.NullInt64, offset int64) time.Time {
	if !unix.Valid {
		return time.Time{}
	}
	loc, ok := z[offset]
	if !ok {
		loc = time.FixedZone("", int(offset))
		z[offset] = loc
	}
	return time.Unix(unix.Int64, 0).In(loc)
}

// SortKeys returns what sorting and threading compare, for every message.
func (s *Store) SortKeys(ctx context.Context, mailboxID int64) ([]store.SortKey, error) {
	st, err := s.rstmts.get(s.ctx, s.rdb, sortKeysQuery)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: prepare sort keys: %w", err)
	}
	rows, err := st.QueryContext(ctx, mailboxID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: sort keys: %w", err)
	}
	defer rows.Close()
	var (
		out    []store.SortKey
		idate  int64
		date   sql.NullInt64
		offset int64
		refs   string
		zs     = zones{}
	)
	for rows.Next() {
		var k store.SortKey
		if err := rows.Scan(&k.UID, &idate, &k.Size, &k.Subject, &k.From, &k.To, &date, &offset,
			&k.MessageID, &k.InReplyTo, &refs); err != nil {
			return nil, fmt.Errorf("sqlite store: sort keys: %w", err)
		}
		k.InternalDate = time.Unix(idate, 0)
		k.Date = zs.at(date, offset)
		if refs != "" {
			k.References = strings.Fields(refs)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: sort keys: %w", err)
	}
	return out, nil
}

// ListItems returns the rows of the given messages, ascending by UID.
func (s *Store) ListItems(ctx context.Context, mailboxID int64, uids []uint32) ([]store.ListItem, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	arg, err := json.Marshal(uids)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list items: %w", err)
	}
	st, err := s.rstmts.get(s.ctx, s.rdb, listItemsQuery)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: prepare list items: %w", err)
	}
	rows, err := st.QueryContext(ctx, mailboxID, string(arg))
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list items: %w", err)
	}
	return scanListItems(rows, len(uids))
}
