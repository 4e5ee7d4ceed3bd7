package sqlite

import (
	"context"
	"fmt"
	"strings"

	"pimail/internal/store"
)

// This file keeps the subscriptions (internal/store/subscriptions.go): one row per
// subscribed name in the subscriptions table, whether or not a mailbox
// has that name.

// subscribedCol is Mailbox.Subscribed as a column of a query on the
// mailboxes table.
const subscribedCol = "EXISTS (SELECT 1 FROM subscriptions s WHERE s.account_id = mailboxes.account_id AND s.name = mailboxes.name)"

// SetSubscribed subscribes or unsubscribes a name.
func (s *Store) SetSubscribed(ctx context.Context, accountID int64, name string, subscribed bool) error {
	n, err := store.NormalizeMailboxName(name)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		if subscribed {
			if err := accountExists(w, accountID); err != nil {
				return err
			}
			if err := subscribe(w, accountID, n); err != nil {
				return err
			}
		} else if _, err := w.exec("DELETE FROM subscriptions WHERE account_id = ? AND name = ?", accountID, n); err != nil {
			return fmt.Errorf("unsubscribe %q: %w", n, err)
		}
		w.publish(accountID, 0)
		return nil
	})
}

// subscribe adds a subscription inside a write request.
func subscribe(w *wtx, accountID int64, name string) error {
	if _, err := w.exec("INSERT OR IGNORE INTO subscriptions (account_id, name) VALUES (?, ?)", accountID, name); err != nil {
		return fmt.Errorf("subscribe %q: %w", name, err)
	}
	return nil
}

// renameSubscriptions moves the subscriptions of a renamed mailbox and its
// children to their new names, inside the rename's write request.
func renameSubscriptions(w *wtx, accountID int64, from, to string) error {
	lo, hi := store.ChildNameRange(from)
	rows, err := w.query("SELECT name FROM subscriptions WHERE account_id = ? AND (name = ? OR (name >= ? AND name < ?))",
		accountID, from, lo, hi)
	if err != nil {
		return fmt.Errorf("list subscriptions to rename: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return fmt.Errorf("list subscriptions to rename: %w", err)
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list subscriptions to rename: %w", err)
	}
	for _, n := range names {
		if _, err := w.exec("DELETE FROM subscriptions WHERE account_id = ? AND name = ?", accountID, n); err != nil {
			return fmt.Errorf("rename subscription %q: %w", n, err)
		}
	}
	for _, n := range names {
		if err := subscribe(w, accountID, to+strings.TrimPrefix(n, from)); err != nil {
			return err
		}
	}
	return nil
}

// Subscriptions lists the account's subscribed names.
func (s *Store) Subscriptions(ctx context.Context, accountID int64) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT name FROM subscriptions WHERE account_id = ? ORDER BY name", accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: subscriptions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("sqlite store: subscriptions: %w", err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: subscriptions: %w", err)
	}
	return out, nil
}
