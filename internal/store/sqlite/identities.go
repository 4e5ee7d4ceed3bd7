package sqlite

import (
	"context"
	"fmt"
	"strings"

	"pimail/internal/store"
)

// Identities (store.Identities, schema version 14): one row each, the
// address unique per account in lower case.

// Identities lists an account's identities in creation order.
func (s *Store) Identities(ctx context.Context, accountID int64) ([]store.Identity, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT id, address, name, signature FROM identities WHERE account_id = ? ORDER BY id", accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: identities of account %d: %w", accountID, err)
	}
	defer rows.Close()
	var out []store.Identity
	for rows.Next() {
		var id store.Identity
		if err := rows.Scan(&id.ID, &id.Address, &id.Name, &id.Signature); err != nil {
			return nil, fmt.Errorf("sqlite store: identities of account %d: %w", accountID, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: identities of account %d: %w", accountID, err)
	}
	return out, nil
}

// PutIdentity creates or replaces an identity.
func (s *Store) PutIdentity(ctx context.Context, accountID int64, id store.Identity) (store.Identity, error) {
	if !store.ValidIdentity(id) {
		return id, fmt.Errorf("identity %q: %w", id.Address, store.ErrInvalid)
	}
	lc := strings.ToLower(id.Address)
	err := s.write(ctx, func(w *wtx) error {
		var taken int
		if err := w.queryRow("SELECT count(*) FROM identities WHERE account_id = ? AND address_lc = ? AND id <> ?",
			accountID, lc, id.ID).Scan(&taken); err != nil {
			return err
		}
		if taken > 0 {
			return store.ErrExists
		}
		if id.ID == 0 {
			err := w.queryRow(`INSERT INTO identities (account_id, address, address_lc, name, signature)
				VALUES (?, ?, ?, ?, ?) RETURNING id`, accountID, id.Address, lc, id.Name, id.Signature).Scan(&id.ID)
			if isConstraint(err) {
				return store.ErrNotFound
			}
			return err
		}
		res, err := w.exec("UPDATE identities SET address = ?, address_lc = ?, name = ?, signature = ? WHERE id = ? AND account_id = ?",
			id.Address, lc, id.Name, id.Signature, id.ID, accountID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return id, fmt.Errorf("put identity %q of account %d: %w", id.Address, accountID, err)
	}
	return id, nil
}

// DeleteIdentity removes an identity of the account.
func (s *Store) DeleteIdentity(ctx context.Context, accountID, id int64) error {
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM identities WHERE id = ? AND account_id = ?", id, accountID); err != nil {
			return fmt.Errorf("delete identity %d of account %d: %w", id, accountID, err)
		}
		return nil
	})
}
