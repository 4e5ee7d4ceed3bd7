package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pimail/internal/store"
)

// ClaimRecent claims the unclaimed recent messages up to upTo
// (store.Recent): one UPDATE of the mailbox row, relaxed like StoreFlags.
func (s *Store) ClaimRecent(ctx context.Context, mailboxID int64, upTo uint32) (uint32, error) {
	var first uint32
	// Most claims find nothing left: another session of the same mailbox
	// was first. A read says so without a write; the floor only rises,
	// so a floor above upTo seen by a read stays above it.
	err := s.readRow(ctx, "SELECT first_recent_uid FROM mailboxes WHERE id = ?", mailboxID).Scan(&first)
	if err == nil && first > upTo {
		return first, nil
	}
	err = s.writeRelaxed(ctx, func(w *wtx) error {
		err := w.queryRow("SELECT first_recent_uid FROM mailboxes WHERE id = ?", mailboxID).Scan(&first)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("mailbox %d: %w", mailboxID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read first recent uid: %w", err)
		}
		if first > upTo {
			return nil
		}
		if _, err := w.exec("UPDATE mailboxes SET first_recent_uid = ? WHERE id = ?", upTo+1, mailboxID); err != nil {
			return fmt.Errorf("claim recent: %w", err)
		}
		return nil
	})
	return first, err
}

var _ store.Recent = (*Store)(nil)
