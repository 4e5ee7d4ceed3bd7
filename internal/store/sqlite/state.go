package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pimail/internal/store"
)

// Preferences, secrets and MTA-STS policies (schema version 12).

// Preferences returns an account's document of app (store.Preferences).
func (s *Store) Preferences(ctx context.Context, accountID int64, app string) ([]byte, int64, error) {
	var doc []byte
	var version int64
	err := s.readRow(ctx, "SELECT doc, version FROM prefs WHERE account_id = ? AND app = ?",
		accountID, app).Scan(&doc, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite store: preferences %q of account %d: %w", app, accountID, err)
	}
	return doc, version, nil
}

// SetPreferences replaces the document if its version is still ifVersion.
func (s *Store) SetPreferences(ctx context.Context, accountID int64, app string, doc []byte, ifVersion int64) (int64, error) {
	if app == "" || len(doc) > store.MaxPreferencesSize || ifVersion < 0 {
		return 0, fmt.Errorf("preferences %q of account %d: %w", app, accountID, store.ErrInvalid)
	}
	if doc == nil {
		doc = []byte{} // the column is NOT NULL
	}
	var version int64
	err := s.write(ctx, func(w *wtx) error {
		var err error
		version, err = casWrite(w, "prefs", "account_id = ?1 AND app = ?2", []any{accountID, app},
			"INSERT INTO prefs (account_id, app, doc, version) VALUES (?1, ?2, ?3, 1)",
			"UPDATE prefs SET doc = ?3, version = version + 1 WHERE account_id = ?1 AND app = ?2 AND version = ?4",
			doc, ifVersion)
		if err != nil {
			return fmt.Errorf("preferences %q of account %d: %w", app, accountID, err)
		}
		return nil
	})
	return version, err
}

// casWrite is the compare-and-swap of a versioned row of table: insert
// it when ifVersion is 0, else update it where its version is still
// ifVersion. where selects the row by keys; insert takes the keys and
// the value, update the keys, the value and ifVersion, in that order. It
// returns the new version; ErrModified when the row's version is not
// ifVersion, ErrNotFound when the insert breaks a foreign key (an unknown
// account).
func casWrite(w *wtx, table, where string, keys []any, insert, update string, value []byte, ifVersion int64) (int64, error) {
	if ifVersion == 0 {
		var n int
		if err := w.queryRow("SELECT count(*) FROM "+table+" WHERE "+where, keys...).Scan(&n); err != nil {
			return 0, err
		}
		if n > 0 {
			return 0, store.ErrModified
		}
		_, err := w.exec(insert, append(keys[:len(keys):len(keys)], value)...)
		if isConstraint(err) {
			return 0, store.ErrNotFound
		}
		if err != nil {
			return 0, err
		}
		return 1, nil
	}
	res, err := w.exec(update, append(keys[:len(keys):len(keys)], value, ifVersion)...)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, err
	} else if n == 0 {
		return 0, store.ErrModified
	}
	return ifVersion + 1, nil
}

// Secret returns the secret named name, storing fresh first when there is
// none (store.Secrets).
func (s *Store) Secret(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	if name == "" || len(fresh) == 0 {
		return nil, fmt.Errorf("secret %q: %w", name, store.ErrInvalid)
	}
	var v []byte
	err := s.readRow(ctx, "SELECT value FROM secrets WHERE name = ?", name).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite store: secret %q: %w", name, err)
	}
	err = s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", name, fresh); err != nil {
			return fmt.Errorf("store secret %q: %w", name, err)
		}
		// Whoever inserted first, this is the secret now.
		if err := w.queryRow("SELECT value FROM secrets WHERE name = ?", name).Scan(&v); err != nil {
			return fmt.Errorf("read secret %q: %w", name, err)
		}
		return nil
	})
	return v, err
}

// SetMTASTSPolicy stores (or, with "", removes) a local domain's policy.
func (s *Store) SetMTASTSPolicy(ctx context.Context, domain, policy string) error {
	d, err := store.NormalizeDomain(domain)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		id, err := domainID(w, d)
		if err != nil {
			return err
		}
		if policy == "" {
			_, err = w.exec("DELETE FROM mta_sts WHERE domain_id = ?", id)
		} else {
			_, err = w.exec(`INSERT INTO mta_sts (domain_id, policy) VALUES (?1, ?2)
				ON CONFLICT (domain_id) DO UPDATE SET policy = ?2`, id, policy)
		}
		if err != nil {
			return fmt.Errorf("store MTA-STS policy of %q: %w", d, err)
		}
		return nil
	})
}

// MTASTSPolicy returns a domain's policy.
func (s *Store) MTASTSPolicy(ctx context.Context, domain string) (string, error) {
	d, err := store.NormalizeDomain(domain)
	if err != nil {
		return "", err
	}
	var p string
	err = s.readRow(ctx, "SELECT p.policy FROM mta_sts p JOIN domains d ON d.id = p.domain_id WHERE d.name = ?", d).Scan(&p)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("MTA-STS policy of %q: %w", d, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("sqlite store: MTA-STS policy of %q: %w", d, err)
	}
	return p, nil
}
