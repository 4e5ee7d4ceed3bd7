package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// The failed-login throttle's log (store.LoginEvents, schema step 4).
// Seqs come from meta's login_seq row (made by the first writer), whose
// lock a writer holds until its commit: writers on every node take turns for the moment of an
// insert, and a reader that sees a seq sees every smaller one (a
// sequence would hand out numbers that commit out of order).

// RecordLogins appends events in one statement; relaxed.
func (s *Store) RecordLogins(ctx context.Context, evs []store.LoginEvent) error {
	if len(evs) == 0 {
		return nil
	}
	nodes := make([]string, len(evs))
	ats := make([]int64, len(evs))
	accounts := make([][]byte, len(evs))
	sources := make([][]byte, len(evs))
	oks := make([]bool, len(evs))
	for i, ev := range evs {
		if !store.ValidLoginEvent(ev) {
			return fmt.Errorf("login event: %w", store.ErrInvalid)
		}
		nodes[i], ats[i], accounts[i], sources[i], oks[i] = ev.Node, ev.Time.UnixMilli(), []byte(ev.Account), []byte(ev.Source), ev.Success
	}
	return s.writeRelaxed(ctx, func(w *wtx) error {
		var last int64
		if err := w.queryRow(`INSERT INTO meta (key, value) VALUES ('login_seq', $1)
			ON CONFLICT (key) DO UPDATE SET value = meta.value + excluded.value RETURNING value`, len(evs)).Scan(&last); err != nil {
			return fmt.Errorf("take login seqs: %w", err)
		}
		if _, err := w.exec(`INSERT INTO login_events (seq, node, at, account, source, success)
			SELECT $1::bigint - $2::bigint + n, node, at, account, source, success
			FROM unnest($3::text[], $4::bigint[], $5::bytea[], $6::bytea[], $7::boolean[])
				WITH ORDINALITY AS e(node, at, account, source, success, n)`,
			last, len(evs), nodes, ats, accounts, sources, oks); err != nil {
			return fmt.Errorf("record logins: %w", err)
		}
		return nil
	})
}

// LoginsAfter reads events past a cursor.
func (s *Store) LoginsAfter(ctx context.Context, after int64, limit int) ([]store.LoginEvent, error) {
	rows, _ := s.pool.Query(ctx, `SELECT seq, node, at, account, source, success FROM login_events
		WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.LoginEvent, error) {
		var ev store.LoginEvent
		var at int64
		var account, source []byte
		err := r.Scan(&ev.Seq, &ev.Node, &at, &account, &source, &ev.Success)
		ev.Time, ev.Account, ev.Source = time.UnixMilli(at), string(account), string(source)
		return ev, err
	})
	if err != nil {
		return nil, storeErr(fmt.Errorf("logins: %w", err))
	}
	return out, nil
}

// PruneLogins removes old events; relaxed.
func (s *Store) PruneLogins(ctx context.Context, failedBefore, succeededBefore time.Time) error {
	return s.writeRelaxed(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM login_events WHERE (NOT success AND at < $1) OR (success AND at < $2)",
			failedBefore.UnixMilli(), succeededBefore.UnixMilli()); err != nil {
			return fmt.Errorf("prune logins: %w", err)
		}
		return nil
	})
}
