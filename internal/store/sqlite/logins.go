package sqlite

import (
	"context"
	"fmt"
	"time"

	"pimail/internal/store"
)

// The failed-login throttle's log (store.LoginEvents, schema version 16).
// One writer commits at a time, so rowids (seq) grow in commit order.

// RecordLogins appends events; relaxed.
func (s *Store) RecordLogins(ctx context.Context, evs []store.LoginEvent) error {
	for _, ev := range evs {
		if !store.ValidLoginEvent(ev) {
			return fmt.Errorf("login event: %w", store.ErrInvalid)
		}
	}
	if len(evs) == 0 {
		return nil
	}
	return s.writeRelaxed(ctx, func(w *wtx) error {
		for _, ev := range evs {
			if _, err := w.exec("INSERT INTO login_events (node, at, account, source, success) VALUES (?, ?, ?, ?, ?)",
				ev.Node, ev.Time.UnixMilli(), ev.Account, ev.Source, ev.Success); err != nil {
				return fmt.Errorf("record login: %w", err)
			}
		}
		return nil
	})
}

// LoginsAfter reads events past a cursor.
func (s *Store) LoginsAfter(ctx context.Context, after int64, limit int) ([]store.LoginEvent, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT seq, node, at, account, source, success FROM login_events
		WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: logins: %w", err)
	}
	defer rows.Close()
	var out []store.LoginEvent
	for rows.Next() {
		var ev store.LoginEvent
		var at int64
		if err := rows.Scan(&ev.Seq, &ev.Node, &at, &ev.Account, &ev.Source, &ev.Success); err != nil {
			return nil, fmt.Errorf("sqlite store: logins: %w", err)
		}
		ev.Time = time.UnixMilli(at)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: logins: %w", err)
	}
	return out, nil
}

// PruneLogins removes old events; relaxed.
func (s *Store) PruneLogins(ctx context.Context, failedBefore, succeededBefore time.Time) error {
	return s.writeRelaxed(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM login_events WHERE (success = 0 AND at < ?) OR (success <> 0 AND at < ?)",
			failedBefore.UnixMilli(), succeededBefore.UnixMilli()); err != nil {
			return fmt.Errorf("prune logins: %w", err)
		}
		return nil
	})
}
