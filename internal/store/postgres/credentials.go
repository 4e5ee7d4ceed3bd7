package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// SetSCRAM stores the SCRAM-SHA-256 keys of an account, bound to its
// current password hash (see store.Credentials).
func (s *Store) SetSCRAM(ctx context.Context, address string, c store.SCRAMCredentials) error {
	addr := strings.ToLower(strings.TrimSpace(address))
	if len(c.Salt) == 0 || c.Iterations <= 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0 {
		return fmt.Errorf("scram credentials for %q: %w", addr, store.ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		tag, err := w.exec(`INSERT INTO scram (account_id, password_hash, salt, iterations, stored_key, server_key)
			SELECT id, password_hash, $2, $3, $4, $5 FROM accounts WHERE address = $1
			ON CONFLICT (account_id) DO UPDATE SET password_hash = excluded.password_hash,
				salt = excluded.salt, iterations = excluded.iterations,
				stored_key = excluded.stored_key, server_key = excluded.server_key`,
			addr, c.Salt, c.Iterations, c.StoredKey, c.ServerKey)
		if err != nil {
			return fmt.Errorf("store scram credentials: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
		}
		return nil
	})
}

// SCRAM returns the SCRAM-SHA-256 keys of an account; ErrNotFound when
// there are none, or when the password changed since they were set.
func (s *Store) SCRAM(ctx context.Context, address string) (store.SCRAMCredentials, error) {
	addr := strings.ToLower(strings.TrimSpace(address))
	var c store.SCRAMCredentials
	err := s.readRow(ctx, `SELECT c.salt, c.iterations, c.stored_key, c.server_key
		FROM scram c JOIN accounts a ON a.id = c.account_id
		WHERE a.address = $1 AND a.password_hash = c.password_hash`, addr).
		Scan(&c.Salt, &c.Iterations, &c.StoredKey, &c.ServerKey)
	if noRows(err) {
		return c, fmt.Errorf("scram credentials for %q: %w", addr, store.ErrNotFound)
	}
	if err != nil {
		return c, storeErr(fmt.Errorf("scram credentials for %q: %w", addr, err))
	}
	return c, nil
}

// AddDKIMKey stores a DKIM signing key.
func (s *Store) AddDKIMKey(ctx context.Context, k store.DKIMKey) error {
	dom := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(k.Domain), "."))
	if dom == "" || k.Selector == "" || len(k.PrivateKey) == 0 ||
		(k.Algorithm != store.DKIMRSA && k.Algorithm != store.DKIMEd25519) {
		return fmt.Errorf("dkim key %q for %q: %w", k.Selector, dom, store.ErrInvalid)
	}
	created := k.Created
	if created.IsZero() {
		created = time.Now()
	}
	return s.write(ctx, func(w *wtx) error {
		tag, err := w.exec(`INSERT INTO dkim_keys (domain, selector, algorithm, private_key, created) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT DO NOTHING`, dom, k.Selector, k.Algorithm, k.PrivateKey, created.Unix())
		if err != nil {
			return fmt.Errorf("insert dkim key: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("dkim key %q for %q: %w", k.Selector, dom, store.ErrExists)
		}
		return nil
	})
}

// DKIMKeys returns the domain's keys, oldest first.
func (s *Store) DKIMKeys(ctx context.Context, domain string) ([]store.DKIMKey, error) {
	dom := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(domain), "."))
	rows, _ := s.pool.Query(ctx, `SELECT domain, selector, algorithm, private_key, created
		FROM dkim_keys WHERE domain = $1 ORDER BY created, selector`, dom)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.DKIMKey, error) {
		var k store.DKIMKey
		var created int64
		err := r.Scan(&k.Domain, &k.Selector, &k.Algorithm, &k.PrivateKey, &created)
		k.Created = time.Unix(created, 0)
		return k, err
	})
	if err != nil {
		return nil, storeErr(fmt.Errorf("dkim keys of %q: %w", dom, err))
	}
	return out, nil
}
