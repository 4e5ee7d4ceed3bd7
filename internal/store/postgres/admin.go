package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// SetAccountDisabled sets accounts.disabled; the directory version moves
// so that RCPT checks and logins on every node see it within a second.
func (s *Store) SetAccountDisabled(ctx context.Context, address string, disabled bool) error {
	_, _, addr, err := store.NormalizeAddress(address, false)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		tag, err := w.exec("UPDATE accounts SET disabled = $1 WHERE address = $2", disabled, addr)
		if err != nil {
			return fmt.Errorf("set disabled of %q: %w", addr, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
		}
		return bumpDirectory(w)
	})
}

// SetAdmin flags or unflags an administrator (see store.AccountAdmin).
// The flagged accounts are locked first, so that two nodes never both
// unflag one of the last two administrators.
func (s *Store) SetAdmin(ctx context.Context, address string, admin bool) error {
	_, _, addr, err := store.NormalizeAddress(address, false)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		rows, _ := w.query("SELECT id FROM accounts WHERE is_admin ORDER BY id FOR UPDATE")
		flagged, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("count administrators: %w", err)
		}
		var id int64
		var was bool
		if err := w.queryRow("SELECT id, is_admin FROM accounts WHERE address = $1", addr).Scan(&id, &was); err != nil {
			if noRows(err) {
				return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
			}
			return fmt.Errorf("look up account %q: %w", addr, err)
		}
		if admin && len(flagged) == 0 {
			// The implicit administrator (the oldest account) keeps its rights.
			if _, err := w.exec("UPDATE accounts SET is_admin = true WHERE id = (SELECT min(id) FROM accounts)"); err != nil {
				return fmt.Errorf("flag first administrator: %w", err)
			}
		}
		if !admin && was && len(flagged) <= 1 {
			return fmt.Errorf("account %q is the last administrator: %w", addr, store.ErrInvalid)
		}
		if _, err := w.exec("UPDATE accounts SET is_admin = $1 WHERE id = $2", admin, id); err != nil {
			return fmt.Errorf("set administrator flag of %q: %w", addr, err)
		}
		return nil
	})
}

// adminCond is true for the administrators among accounts a.
const adminCond = `(a.is_admin OR (NOT EXISTS (SELECT 1 FROM accounts WHERE is_admin)
	AND a.id = (SELECT min(id) FROM accounts)))`

// IsAdmin reports whether the account is an administrator.
func (s *Store) IsAdmin(ctx context.Context, accountID int64) (bool, error) {
	var ok bool
	err := s.readRow(ctx, "SELECT EXISTS (SELECT 1 FROM accounts a WHERE a.id = $1 AND "+adminCond+")", accountID).Scan(&ok)
	if err != nil {
		return false, storeErr(fmt.Errorf("is admin: %w", err))
	}
	return ok, nil
}

// Admins lists the administrators' addresses.
func (s *Store) Admins(ctx context.Context) ([]string, error) {
	rows, _ := s.pool.Query(ctx, "SELECT a.address FROM accounts a WHERE "+adminCond+" ORDER BY a.address")
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, storeErr(fmt.Errorf("admins: %w", err))
	}
	return out, nil
}
