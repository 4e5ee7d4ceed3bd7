package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"pimail/internal/store"
)

// Browser sessions of the webmail and the web admin (store.Sessions,
// schema version 12). Lookups are one primary-key read; touches are
// relaxed writes (writer.go), and the websession package makes at most
// one a minute per session.

// CreateSession stores a session after pruning expired ones and the
// account's least recently seen beyond maxPerAccount.
func (s *Store) CreateSession(ctx context.Context, ss store.Session, maxPerAccount int) error {
	if ss.App == "" || ss.ID == "" {
		return fmt.Errorf("session: %w", store.ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM sessions WHERE expires <= ?", ss.Created.UnixMilli()); err != nil {
			return fmt.Errorf("prune sessions: %w", err)
		}
		if maxPerAccount > 0 {
			// Keep maxPerAccount-1 of them, most recently seen first.
			if _, err := w.exec(`DELETE FROM sessions WHERE app = ?1 AND account_id = ?2 AND id IN
				(SELECT id FROM sessions WHERE app = ?1 AND account_id = ?2
				 ORDER BY last_seen DESC LIMIT -1 OFFSET ?3)`, ss.App, ss.AccountID, maxPerAccount-1); err != nil {
				return fmt.Errorf("bound sessions: %w", err)
			}
		}
		_, err := w.exec(`INSERT INTO sessions (app, id, account_id, csrf, created, last_seen, expires, client)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, ss.App, ss.ID, ss.AccountID, ss.CSRF,
			ss.Created.UnixMilli(), ss.LastSeen.UnixMilli(), ss.Expires.UnixMilli(), store.CutSessionClient(ss.Client))
		if isConstraint(err) {
			var n int
			if err := w.queryRow("SELECT count(*) FROM accounts WHERE id = ?", ss.AccountID).Scan(&n); err != nil {
				return fmt.Errorf("look up account: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("session of account %d: %w", ss.AccountID, store.ErrNotFound)
			}
			return fmt.Errorf("session: %w", store.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		return nil
	})
}

// Session returns a live session with the account's address.
func (s *Store) Session(ctx context.Context, app, id string, now time.Time) (store.Session, error) {
	ss := store.Session{App: app, ID: id}
	var created, lastSeen, expires int64
	err := s.readRow(ctx, `SELECT s.account_id, a.address, s.csrf, s.created, s.last_seen, s.expires, s.client
		FROM sessions s JOIN accounts a ON a.id = s.account_id
		WHERE s.app = ? AND s.id = ? AND s.expires > ?`, app, id, now.UnixMilli()).
		Scan(&ss.AccountID, &ss.Address, &ss.CSRF, &created, &lastSeen, &expires, &ss.Client)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("sqlite store: session: %w", err)
	}
	ss.Created, ss.LastSeen, ss.Expires = time.UnixMilli(created), time.UnixMilli(lastSeen), time.UnixMilli(expires)
	return ss, nil
}

// TouchSession moves a session's last use and expiry forward; relaxed.
func (s *Store) TouchSession(ctx context.Context, app, id string, lastSeen, expires time.Time) error {
	return s.writeRelaxed(ctx, func(w *wtx) error {
		if _, err := w.exec(`UPDATE sessions SET last_seen = max(last_seen, ?3), expires = max(expires, ?4)
			WHERE app = ?1 AND id = ?2`, app, id, lastSeen.UnixMilli(), expires.UnixMilli()); err != nil {
			return fmt.Errorf("touch session: %w", err)
		}
		return nil
	})
}

// DeleteSession removes a session.
func (s *Store) DeleteSession(ctx context.Context, app, id string) error {
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM sessions WHERE app = ? AND id = ?", app, id); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return nil
	})
}

// DeleteAccountSessions removes an account's sessions of app but keep.
func (s *Store) DeleteAccountSessions(ctx context.Context, app string, accountID int64, keep string) error {
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM sessions WHERE app = ? AND account_id = ? AND id <> ?", app, accountID, keep); err != nil {
			return fmt.Errorf("delete sessions of account %d: %w", accountID, err)
		}
		return nil
	})
}

// AccountSessions lists an account's live sessions of app, most recently
// seen first (schema version 14 added client).
func (s *Store) AccountSessions(ctx context.Context, app string, accountID int64, now time.Time) ([]store.Session, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT s.id, a.address, s.csrf, s.created, s.last_seen, s.expires, s.client
		FROM sessions s JOIN accounts a ON a.id = s.account_id
		WHERE s.app = ? AND s.account_id = ? AND s.expires > ? ORDER BY s.last_seen DESC, s.id`, app, accountID, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sqlite store: sessions of account %d: %w", accountID, err)
	}
	defer rows.Close()
	var out []store.Session
	for rows.Next() {
		ss := store.Session{App: app, AccountID: accountID}
		var created, lastSeen, expires int64
		if err := rows.Scan(&ss.ID, &ss.Address, &ss.CSRF, &created, &lastSeen, &expires, &ss.Client); err != nil {
			return nil, fmt.Errorf("sqlite store: sessions of account %d: %w", accountID, err)
		}
		ss.Created, ss.LastSeen, ss.Expires = time.UnixMilli(created), time.UnixMilli(lastSeen), time.UnixMilli(expires)
		out = append(out, ss)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: sessions of account %d: %w", accountID, err)
	}
	return out, nil
}
