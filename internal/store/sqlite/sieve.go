package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"pimail/internal/store"
)

// Sieve scripts and vacation records (store.Sieve; schema migration 11).
// ActiveSieveScript runs once per recipient account of every delivery: it
// is one lookup in the partial index of active scripts.

var _ store.Sieve = (*Store)(nil)

const sieveCols = "name, content, active, updated"

func scanSieve(sc interface{ Scan(...any) error }) (store.SieveScript, error) {
	var sc2 store.SieveScript
	var updated int64
	err := sc.Scan(&sc2.Name, &sc2.Content, &sc2.Active, &updated)
	sc2.Updated = time.UnixMilli(updated)
	return sc2, err
}

func (s *Store) SieveScripts(ctx context.Context, accountID int64) ([]store.SieveScript, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+sieveCols+" FROM sieve_scripts WHERE account_id = ? ORDER BY name", accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list sieve scripts: %w", err)
	}
	defer rows.Close()
	var out []store.SieveScript
	for rows.Next() {
		sc, err := scanSieve(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: list sieve scripts: %w", err)
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

func (s *Store) SieveScript(ctx context.Context, accountID int64, name string) (store.SieveScript, error) {
	sc, err := scanSieve(s.readRow(ctx, "SELECT "+sieveCols+" FROM sieve_scripts WHERE account_id = ? AND name = ?", accountID, name))
	return sc, sieveErr(err, "sieve script %q", name)
}

func (s *Store) ActiveSieveScript(ctx context.Context, accountID int64) (store.SieveScript, error) {
	sc, err := scanSieve(s.readRow(ctx, "SELECT "+sieveCols+" FROM sieve_scripts WHERE account_id = ? AND active", accountID))
	return sc, sieveErr(err, "active sieve script of account %d", accountID)
}

func sieveErr(err error, format string, args ...any) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf(format+": %w", append(args, store.ErrNotFound)...)
	}
	return fmt.Errorf("sqlite store: "+format+": %w", append(args, err)...)
}

func (s *Store) PutSieveScript(ctx context.Context, accountID int64, name, content string) error {
	if name == "" {
		return fmt.Errorf("sieve script name: %w", store.ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		if err := accountExists(w, accountID); err != nil {
			return err
		}
		_, err := w.exec(`INSERT INTO sieve_scripts (account_id, name, content, updated) VALUES (?, ?, ?, ?)
			ON CONFLICT (account_id, name) DO UPDATE SET content = excluded.content, updated = excluded.updated`,
			accountID, name, content, time.Now().UnixMilli())
		if err != nil {
			return fmt.Errorf("store sieve script %q: %w", name, err)
		}
		return nil
	})
}

func (s *Store) SetActiveSieveScript(ctx context.Context, accountID int64, name string) error {
	return s.write(ctx, func(w *wtx) error {
		if name != "" {
			var one int
			err := w.queryRow("SELECT 1 FROM sieve_scripts WHERE account_id = ? AND name = ?", accountID, name).Scan(&one)
			if err != nil {
				return sieveErr(err, "sieve script %q", name)
			}
		}
		// Off first, then on: the partial unique index allows one
		// active row per account at every step.
		if _, err := w.exec("UPDATE sieve_scripts SET active = 0 WHERE account_id = ? AND active AND name <> ?", accountID, name); err != nil {
			return fmt.Errorf("deactivate sieve scripts: %w", err)
		}
		if name == "" {
			return nil
		}
		if _, err := w.exec("UPDATE sieve_scripts SET active = 1 WHERE account_id = ? AND name = ?", accountID, name); err != nil {
			return fmt.Errorf("activate sieve script %q: %w", name, err)
		}
		return nil
	})
}

func (s *Store) RenameSieveScript(ctx context.Context, accountID int64, from, to string) error {
	if to == "" {
		return fmt.Errorf("sieve script name: %w", store.ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		var one int
		err := w.queryRow("SELECT 1 FROM sieve_scripts WHERE account_id = ? AND name = ?", accountID, to).Scan(&one)
		if err == nil {
			return fmt.Errorf("sieve script %q: %w", to, store.ErrExists)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("look up sieve script %q: %w", to, err)
		}
		res, err := w.exec("UPDATE sieve_scripts SET name = ?, updated = ? WHERE account_id = ? AND name = ?",
			to, time.Now().UnixMilli(), accountID, from)
		if err != nil {
			return fmt.Errorf("rename sieve script %q: %w", from, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("sieve script %q: %w", from, store.ErrNotFound)
		}
		return nil
	})
}

func (s *Store) DeleteSieveScript(ctx context.Context, accountID int64, name string) error {
	return s.write(ctx, func(w *wtx) error {
		var active bool
		err := w.queryRow("SELECT active FROM sieve_scripts WHERE account_id = ? AND name = ?", accountID, name).Scan(&active)
		if err != nil {
			return sieveErr(err, "sieve script %q", name)
		}
		if active {
			return fmt.Errorf("sieve script %q: %w", name, store.ErrScriptActive)
		}
		if _, err := w.exec("DELETE FROM sieve_scripts WHERE account_id = ? AND name = ?", accountID, name); err != nil {
			return fmt.Errorf("delete sieve script %q: %w", name, err)
		}
		return nil
	})
}

func (s *Store) ResetSieve(ctx context.Context, accountID int64) error {
	return s.write(ctx, func(w *wtx) error {
		if err := accountExists(w, accountID); err != nil {
			return err
		}
		for _, q := range []string{"DELETE FROM sieve_scripts WHERE account_id = ?", "DELETE FROM sieve_vacation WHERE account_id = ?"} {
			if _, err := w.exec(q, accountID); err != nil {
				return fmt.Errorf("reset sieve: %w", err)
			}
		}
		return nil
	})
}

// vacationKeep is how long a vacation record is kept: longer than the
// longest :days (sieve.MaxVacationDays), after which it decides nothing.
const vacationKeep = 400 * 24 * time.Hour

// ClaimVacationReply inserts the record, or moves its time forward when
// the period has passed, in one statement: a row changed means the reply
// may go. The account's records older than vacationKeep go in the same
// transaction, so that the table does not grow without end.
func (s *Store) ClaimVacationReply(ctx context.Context, accountID int64, handle, sender string, now time.Time, period time.Duration) (bool, error) {
	sender = strings.ToLower(sender)
	var claimed bool
	err := s.write(ctx, func(w *wtx) error {
		claimed = false
		res, err := w.exec(`INSERT INTO sieve_vacation (account_id, handle, sender, replied) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (account_id, handle, sender) DO UPDATE SET replied = excluded.replied
			WHERE sieve_vacation.replied <= ?5`,
			accountID, handle, sender, now.UnixMilli(), now.Add(-period).UnixMilli())
		if err != nil {
			return fmt.Errorf("claim vacation reply: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("claim vacation reply: %w", err)
		}
		claimed = n == 1
		if _, err := w.exec("DELETE FROM sieve_vacation WHERE account_id = ? AND replied < ?",
			accountID, now.Add(-vacationKeep).UnixMilli()); err != nil {
			return fmt.Errorf("prune vacation records: %w", err)
		}
		return nil
	})
	return claimed, err
}
