package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pimail/internal/store"
)

// The spam filter's models and junk ledger (store.SpamModels, schema
// version 12).

// SpamModel returns a stored model and its version.
func (s *Store) SpamModel(ctx context.Context, accountID int64) ([]byte, int64, error) {
	var data []byte
	var version int64
	err := s.readRow(ctx, "SELECT data, version FROM spam_models WHERE account_id = ?", accountID).Scan(&data, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite store: spam model of account %d: %w", accountID, err)
	}
	return data, version, nil
}

// SpamModelVersion returns a stored model's version (0: none).
func (s *Store) SpamModelVersion(ctx context.Context, accountID int64) (int64, error) {
	var version int64
	err := s.readRow(ctx, "SELECT version FROM spam_models WHERE account_id = ?", accountID).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite store: spam model version of account %d: %w", accountID, err)
	}
	return version, nil
}

// SaveSpamModel replaces a model by compare-and-swap and records ledger
// entries in the same transaction.
func (s *Store) SaveSpamModel(ctx context.Context, accountID int64, data []byte, ifVersion int64, trained []store.JunkTrained) (int64, error) {
	if accountID < 0 || ifVersion < 0 || (accountID == 0 && len(trained) > 0) {
		return 0, fmt.Errorf("spam model of account %d: %w", accountID, store.ErrInvalid)
	}
	if data == nil {
		data = []byte{} // the column is NOT NULL
	}
	var version int64
	err := s.write(ctx, func(w *wtx) error {
		if accountID != 0 {
			// The model has no foreign key (account 0 is none).
			var n int
			if err := w.queryRow("SELECT count(*) FROM accounts WHERE id = ?", accountID).Scan(&n); err != nil {
				return fmt.Errorf("look up account: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("spam model of account %d: %w", accountID, store.ErrNotFound)
			}
		}
		var err error
		version, err = casWrite(w, "spam_models", "account_id = ?1", []any{accountID},
			"INSERT INTO spam_models (account_id, data, version) VALUES (?1, ?2, 1)",
			"UPDATE spam_models SET data = ?2, version = version + 1 WHERE account_id = ?1 AND version = ?3",
			data, ifVersion)
		if err != nil {
			return fmt.Errorf("spam model of account %d: %w", accountID, err)
		}
		for _, t := range trained {
			// Only for a blob that is still there: its trigger removes
			// the entry with it, but nothing would remove one of a blob
			// collected meanwhile.
			if _, err := w.exec(`INSERT INTO junk_ledger (blob_id, account_id, spam)
				SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM blobs WHERE id = ?1)
				ON CONFLICT (blob_id, account_id) DO UPDATE SET spam = ?3`, t.BlobID, accountID, t.Spam); err != nil {
				return fmt.Errorf("junk ledger of account %d: %w", accountID, err)
			}
		}
		return nil
	})
	return version, err
}

// JunkTrained reports how an account's copy of a blob was trained.
func (s *Store) JunkTrained(ctx context.Context, accountID, blobID int64) (spam, ok bool, err error) {
	err = s.readRow(ctx, "SELECT spam FROM junk_ledger WHERE blob_id = ? AND account_id = ?", blobID, accountID).Scan(&spam)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("sqlite store: junk ledger of account %d: %w", accountID, err)
	}
	return spam, true, nil
}
