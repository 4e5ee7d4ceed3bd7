package postgres

// Sorting and threading a message list (store.ListSorter): the keys of a
// whole mailbox from the index columns of blob_meta in one statement, and
// the rows of one page by UID.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
	"pimail/internal/store/envcodec"
)

// SortKeys returns what sorting and threading compare, for every message.
// Message-ID and In-Reply-To come from the compact envelope, as
// store/sqlite's columns come from the parsed envelope at delivery.
func (s *Store) SortKeys(ctx context.Context, mailboxID int64) ([]store.SortKey, error) {
	rows, _ := s.pool.Query(ctx, `SELECT m.uid, m.internal_date, b.size, i.subject, i.from_addr, i.to_addr,
		i.date, i.date_offset, i.refs, i.envelope
		FROM mail m JOIN blobs b ON b.id = m.blob_id JOIN blob_meta i ON i.blob_id = m.blob_id
		WHERE m.mailbox_id = $1 ORDER BY m.uid`, mailboxID)
	var (
		out                     []store.SortKey
		k                       store.SortKey
		idate                   int64
		date                    *int64
		offset                  int32
		subject, from, to, refs []byte
		env                     []byte
		zs                      = zones{}
	)
	_, err := pgx.ForEachRow(rows, []any{&k.UID, &idate, &k.Size, &subject, &from, &to, &date, &offset, &refs, &env}, func() error {
		key := k
		key.Subject, key.From, key.To = string(subject), string(from), string(to)
		key.InternalDate = time.Unix(idate, 0)
		key.Date = zs.at(date, offset)
		key.References = nil
		if len(refs) > 0 {
			key.References = strings.Fields(string(refs))
		}
		irt, mid, err := envcodec.IDs(env)
		if err != nil {
			return fmt.Errorf("message %d: %w", key.UID, err)
		}
		key.InReplyTo = strings.TrimSpace(irt)
		key.MessageID = store.NormMessageID(mid)
		out = append(out, key)
		return nil
	})
	if err != nil {
		return nil, storeErr(fmt.Errorf("sort keys of mailbox %d: %w", mailboxID, err))
	}
	return out, nil
}

// ListItems returns the rows of the given messages, ascending by UID.
func (s *Store) ListItems(ctx context.Context, mailboxID int64, uids []uint32) ([]store.ListItem, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(uids))
	for i, u := range uids {
		ids[i] = int64(u)
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+listItemCols+`
		FROM mail m JOIN blobs b ON b.id = m.blob_id JOIN blob_meta i ON i.blob_id = m.blob_id
		WHERE m.mailbox_id = $1 AND m.uid = ANY($2) ORDER BY m.uid`, mailboxID, ids)
	out, err := scanListItems(rows, len(uids))
	if err != nil {
		return nil, storeErr(fmt.Errorf("list items of mailbox %d: %w", mailboxID, err))
	}
	return out, nil
}
