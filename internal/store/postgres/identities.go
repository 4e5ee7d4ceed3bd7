package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// Identities (store.Identities, schema step 3): one row each, the address
// unique per account in lower case (a unique index, which also decides
// between two nodes creating the same address at once).

// Identities lists an account's identities in creation order.
func (s *Store) Identities(ctx context.Context, accountID int64) ([]store.Identity, error) {
	rows, _ := s.pool.Query(ctx, "SELECT id, address, name, signature FROM identities WHERE account_id = $1 ORDER BY id", accountID)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Identity, error) {
		var id store.Identity
		err := r.Scan(&id.ID, &id.Address, &id.Name, &id.Signature)
		return id, err
	})
	if err != nil {
		return nil, storeErr(fmt.Errorf("identities of account %d: %w", accountID, err))
	}
	return out, nil
}

// PutIdentity creates or replaces an identity.
func (s *Store) PutIdentity(ctx context.Context, accountID int64, id store.Identity) (store.Identity, error) {
	if !store.ValidIdentity(id) {
		return id, fmt.Errorf("identity %q: %w", id.Address, store.ErrInvalid)
	}
	lc := strings.ToLower(id.Address)
	newID := id.ID
	err := s.write(ctx, func(w *wtx) error {
		var err error
		if id.ID == 0 {
			err = w.queryRow(`INSERT INTO identities (account_id, address, address_lc, name, signature)
				VALUES ($1, $2, $3, $4, $5) RETURNING id`, accountID, id.Address, lc, id.Name, id.Signature).Scan(&newID)
			if sqlState(err) == codeForeignKeyViolation {
				return store.ErrNotFound
			}
		} else {
			err = w.queryRow(`UPDATE identities SET address = $1, address_lc = $2, name = $3, signature = $4
				WHERE id = $5 AND account_id = $6 RETURNING id`, id.Address, lc, id.Name, id.Signature, id.ID, accountID).Scan(&newID)
			if noRows(err) {
				return store.ErrNotFound
			}
		}
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return id, storeErr(fmt.Errorf("put identity %q of account %d: %w", id.Address, accountID, err))
	}
	id.ID = newID
	return id, nil
}

// DeleteIdentity removes an identity of the account.
func (s *Store) DeleteIdentity(ctx context.Context, accountID, id int64) error {
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM identities WHERE id = $1 AND account_id = $2", id, accountID); err != nil {
			return fmt.Errorf("delete identity %d of account %d: %w", id, accountID, err)
		}
		return nil
	})
}
