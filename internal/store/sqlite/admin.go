package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pimail/internal/store"
)

// SetAccountDisabled sets accounts.disabled; the directory version moves so
// that RCPT checks and logins see it within a second.
func (s *Store) SetAccountDisabled(ctx context.Context, address string, disabled bool) error {
	_, _, addr, err := store.NormalizeAddress(address, false)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		res, err := w.exec("UPDATE accounts SET disabled = ? WHERE address = ?", disabled, addr)
		if err != nil {
			return fmt.Errorf("set disabled of %q: %w", addr, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
		}
		return bumpDirectory(w)
	})
}

// SetAdmin flags or unflags an administrator (see store.AccountAdmin).
func (s *Store) SetAdmin(ctx context.Context, address string, admin bool) error {
	_, _, addr, err := store.NormalizeAddress(address, false)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		var id int64
		var was bool
		if err := w.queryRow("SELECT id, is_admin FROM accounts WHERE address = ?", addr).Scan(&id, &was); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
			}
			return fmt.Errorf("look up account %q: %w", addr, err)
		}
		var flagged int
		if err := w.queryRow("SELECT count(*) FROM accounts WHERE is_admin = 1").Scan(&flagged); err != nil {
			return fmt.Errorf("count administrators: %w", err)
		}
		if admin && flagged == 0 {
			// The implicit administrator (the oldest account) keeps its rights.
			if _, err := w.exec("UPDATE accounts SET is_admin = 1 WHERE id = (SELECT min(id) FROM accounts)"); err != nil {
				return fmt.Errorf("flag first administrator: %w", err)
			}
		}
		if !admin && was && flagged <= 1 {
			return fmt.Errorf("account %q is the last administrator: %w", addr, store.ErrInvalid)
		}
		if _, err := w.exec("UPDATE accounts SET is_admin = ? WHERE id = ?", admin, id); err != nil {
			return fmt.Errorf("set administrator flag of %q: %w", addr, err)
		}
		return nil
	})
}

// adminCond is true for the administrators among accounts a.
const adminCond = `(a.is_admin = 1 OR (NOT EXISTS (SELECT 1 FROM accounts WHERE is_admin = 1)
	AND a.id = (SELECT min(id) FROM accounts)))`

// IsAdmin reports whether the account is an administrator.
func (s *Store) IsAdmin(ctx context.Context, accountID int64) (bool, error) {
	var ok bool
	err := s.rdb.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM accounts a WHERE a.id = ? AND "+adminCond+")", accountID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("sqlite store: is admin: %w", err)
	}
	return ok, nil
}

// Admins lists the administrators' addresses.
func (s *Store) Admins(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT a.address FROM accounts a WHERE "+adminCond+" ORDER BY a.address")
	if err != nil {
		return nil, fmt.Errorf("sqlite store: admins: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, fmt.Errorf("sqlite store: admins: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: admins: %w", err)
	}
	return out, nil
}
