package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// Sieve scripts and vacation records (store.Sieve). At most one script
// of an account is active: a partial unique index says so to every node.

const sieveCols = "name, content, active, updated"

func scanSieve(r pgx.Row) (store.SieveScript, error) {
	var sc store.SieveScript
	var updated int64
	err := r.Scan(&sc.Name, &sc.Content, &sc.Active, &updated)
	sc.Updated = time.UnixMilli(updated)
	return sc, err
}

func (s *Store) SieveScripts(ctx context.Context, accountID int64) ([]store.SieveScript, error) {
	rows, _ := s.pool.Query(ctx, "SELECT "+sieveCols+" FROM sieve_scripts WHERE account_id = $1 ORDER BY name", accountID)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.SieveScript, error) { return scanSieve(r) })
	if err != nil {
		return nil, storeErr(fmt.Errorf("list sieve scripts: %w", err))
	}
	return out, nil
}

func (s *Store) SieveScript(ctx context.Context, accountID int64, name string) (store.SieveScript, error) {
	sc, err := scanSieve(s.readRow(ctx, "SELECT "+sieveCols+" FROM sieve_scripts WHERE account_id = $1 AND name = $2", accountID, name))
	return sc, sieveErr(err, "sieve script %q", name)
}

func (s *Store) ActiveSieveScript(ctx context.Context, accountID int64) (store.SieveScript, error) {
	sc, err := scanSieve(s.readRow(ctx, "SELECT "+sieveCols+" FROM sieve_scripts WHERE account_id = $1 AND active", accountID))
	return sc, sieveErr(err, "active sieve script of account %d", accountID)
}

func sieveErr(err error, format string, args ...any) error {
	switch {
	case err == nil:
		return nil
	case noRows(err):
		return fmt.Errorf(format+": %w", append(args, store.ErrNotFound)...)
	}
	return storeErr(fmt.Errorf(format+": %w", append(args, err)...))
}

func (s *Store) PutSieveScript(ctx context.Context, accountID int64, name, content string) error {
	if name == "" {
		return fmt.Errorf("sieve script name: %w", store.ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		if err := accountExists(w, accountID); err != nil {
			return err
		}
		_, err := w.exec(`INSERT INTO sieve_scripts (account_id, name, content, updated) VALUES ($1, $2, $3, $4)
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
			err := w.queryRow("SELECT 1 FROM sieve_scripts WHERE account_id = $1 AND name = $2 FOR UPDATE", accountID, name).Scan(&one)
			if err != nil {
				return sieveErr(err, "sieve script %q", name)
			}
		}
		// Off first, then on: the partial unique index allows one
		// active row per account at every step.
		if _, err := w.exec("UPDATE sieve_scripts SET active = false WHERE account_id = $1 AND active AND name <> $2", accountID, name); err != nil {
			return fmt.Errorf("deactivate sieve scripts: %w", err)
		}
		if name == "" {
			return nil
		}
		if _, err := w.exec("UPDATE sieve_scripts SET active = true WHERE account_id = $1 AND name = $2", accountID, name); err != nil {
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
		var taken bool
		if err := w.queryRow("SELECT EXISTS (SELECT 1 FROM sieve_scripts WHERE account_id = $1 AND name = $2)", accountID, to).Scan(&taken); err != nil {
			return fmt.Errorf("look up sieve script %q: %w", to, err)
		}
		if taken {
			return fmt.Errorf("sieve script %q: %w", to, store.ErrExists)
		}
		tag, err := w.exec("UPDATE sieve_scripts SET name = $1, updated = $2 WHERE account_id = $3 AND name = $4",
			to, time.Now().UnixMilli(), accountID, from)
		if isUnique(err) {
			return fmt.Errorf("sieve script %q: %w", to, store.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("rename sieve script %q: %w", from, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("sieve script %q: %w", from, store.ErrNotFound)
		}
		return nil
	})
}

func (s *Store) DeleteSieveScript(ctx context.Context, accountID int64, name string) error {
	return s.write(ctx, func(w *wtx) error {
		var active bool
		err := w.queryRow("SELECT active FROM sieve_scripts WHERE account_id = $1 AND name = $2 FOR UPDATE", accountID, name).Scan(&active)
		if err != nil {
			return sieveErr(err, "sieve script %q", name)
		}
		if active {
			return fmt.Errorf("sieve script %q: %w", name, store.ErrScriptActive)
		}
		if _, err := w.exec("DELETE FROM sieve_scripts WHERE account_id = $1 AND name = $2", accountID, name); err != nil {
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
		for _, q := range []string{"DELETE FROM sieve_scripts WHERE account_id = $1", "DELETE FROM sieve_vacation WHERE account_id = $1"} {
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
// may go, on whichever node delivers. The account's records older than
// vacationKeep go in the same transaction.
func (s *Store) ClaimVacationReply(ctx context.Context, accountID int64, handle, sender string, now time.Time, period time.Duration) (bool, error) {
	sender = strings.ToLower(sender)
	var claimed bool
	err := s.write(ctx, func(w *wtx) error {
		tag, err := w.exec(`INSERT INTO sieve_vacation (account_id, handle, sender, replied) VALUES ($1, $2, $3, $4)
			ON CONFLICT (account_id, handle, sender) DO UPDATE SET replied = excluded.replied
			WHERE sieve_vacation.replied <= $5`,
			accountID, []byte(handle), []byte(sender), now.UnixMilli(), now.Add(-period).UnixMilli())
		if err != nil {
			return fmt.Errorf("claim vacation reply: %w", err)
		}
		claimed = tag.RowsAffected() == 1
		if _, err := w.exec("DELETE FROM sieve_vacation WHERE account_id = $1 AND replied < $2",
			accountID, now.Add(-vacationKeep).UnixMilli()); err != nil {
			return fmt.Errorf("prune vacation records: %w", err)
		}
		return nil
	})
	return claimed, err
}
