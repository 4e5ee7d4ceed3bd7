package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// bumpDirectory increments the directory version; every directory change
// calls it in the same transaction.
func bumpDirectory(w *wtx) error {
	if _, err := w.exec("UPDATE meta SET value = value + 1 WHERE key = 'directory_version'"); err != nil {
		return fmt.Errorf("bump directory version: %w", err)
	}
	return nil
}

func domainID(w *wtx, name string) (int64, error) {
	var id int64
	err := w.queryRow("SELECT id FROM domains WHERE name = $1", name).Scan(&id)
	if noRows(err) {
		return 0, fmt.Errorf("domain %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("look up domain %q: %w", name, err)
	}
	return id, nil
}

func (s *Store) AddDomain(ctx context.Context, name string) (store.Domain, error) {
	d, err := store.NormalizeDomain(name)
	if err != nil {
		return store.Domain{}, err
	}
	var out store.Domain
	err = s.write(ctx, func(w *wtx) error {
		var id int64
		err := w.queryRow("INSERT INTO domains (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING id", d).Scan(&id)
		if noRows(err) {
			return fmt.Errorf("domain %q: %w", d, store.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("insert domain: %w", err)
		}
		out = store.Domain{ID: id, Name: d}
		return bumpDirectory(w)
	})
	return out, err
}

// RemoveDomain deletes a domain; ErrInvalid while accounts or aliases of
// the domain exist.
func (s *Store) RemoveDomain(ctx context.Context, name string) error {
	d, err := store.NormalizeDomain(name)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		id, err := domainID(w, d)
		if err != nil {
			return err
		}
		var n int
		if err := w.queryRow("SELECT (SELECT count(*) FROM accounts WHERE domain_id = $1) + (SELECT count(*) FROM aliases WHERE domain_id = $1)", id).Scan(&n); err != nil {
			return fmt.Errorf("count domain users: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("domain %q has %d accounts or alias targets: %w", d, n, store.ErrInvalid)
		}
		if _, err := w.exec("DELETE FROM domains WHERE id = $1", id); err != nil {
			return fmt.Errorf("delete domain: %w", err)
		}
		return bumpDirectory(w)
	})
}

// querier is what the pool and a transaction have in common.
type querier interface {
	Query(ctx context.Context, q string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, q string, args ...any) pgx.Row
}

func (s *Store) Domains(ctx context.Context) ([]store.Domain, error) {
	return queryDomains(ctx, s.pool)
}

func queryDomains(ctx context.Context, q querier) ([]store.Domain, error) {
	rows, _ := q.Query(ctx, "SELECT id, name FROM domains ORDER BY name")
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Domain, error) {
		var d store.Domain
		err := r.Scan(&d.ID, &d.Name)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres store: list domains: %w", err)
	}
	return out, nil
}

// AddAccount creates the account and its default mailboxes. The address
// must not already be an account or an alias.
func (s *Store) AddAccount(ctx context.Context, address, passwordHash string) (store.Account, error) {
	_, dom, addr, err := store.NormalizeAddress(address, false)
	if err != nil {
		return store.Account{}, err
	}
	var out store.Account
	err = s.write(ctx, func(w *wtx) error {
		did, err := domainID(w, dom)
		if err != nil {
			return err
		}
		var alias bool
		if err := w.queryRow("SELECT EXISTS (SELECT 1 FROM aliases WHERE address = $1)", addr).Scan(&alias); err != nil {
			return fmt.Errorf("look up alias: %w", err)
		}
		if alias {
			return fmt.Errorf("account %q: an alias has this address: %w", addr, store.ErrExists)
		}
		created := time.Now().Truncate(time.Second)
		var id int64
		err = w.queryRow(`INSERT INTO accounts (address, domain_id, password_hash, created) VALUES ($1, $2, $3, $4)
			ON CONFLICT (address) DO NOTHING RETURNING id`, addr, did, passwordHash, created.Unix()).Scan(&id)
		if noRows(err) {
			return fmt.Errorf("account %q: %w", addr, store.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		for _, mb := range store.DefaultMailboxes {
			if _, err := createMailbox(w, id, mb.Name, mb.SpecialUse); err != nil {
				return err
			}
			if err := subscribe(w, id, mb.Name); err != nil {
				return err
			}
		}
		out = store.Account{ID: id, Address: addr, DomainID: did, PasswordHash: passwordHash, Created: created}
		w.publish(id, 0)
		return bumpDirectory(w)
	})
	return out, err
}

func (s *Store) SetPassword(ctx context.Context, address, passwordHash string) error {
	addr := strings.ToLower(strings.TrimSpace(address))
	return s.write(ctx, func(w *wtx) error {
		tag, err := w.exec("UPDATE accounts SET password_hash = $1 WHERE address = $2", passwordHash, addr)
		if err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
		}
		return bumpDirectory(w)
	})
}

// RemoveAccount deletes the account with its mailboxes and messages
// (their blobs are collected in the background) and everything kept for
// it: what has a foreign key goes with the account row, the spam model
// (account 0 is no account) by a statement of its own.
func (s *Store) RemoveAccount(ctx context.Context, address string) error {
	addr := strings.ToLower(strings.TrimSpace(address))
	err := s.write(ctx, func(w *wtx) error {
		var id int64
		err := w.queryRow("SELECT id FROM accounts WHERE address = $1 FOR UPDATE", addr).Scan(&id)
		if noRows(err) {
			return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("look up account: %w", err)
		}
		stmts := []string{
			`UPDATE blobs SET refcount = refcount - c.n FROM
				(SELECT blob_id, count(*) AS n FROM mail
				 WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = $1)
				 GROUP BY blob_id) AS c
			 WHERE blobs.id = c.blob_id`,
			"DELETE FROM mail WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = $1)",
			"DELETE FROM expunged WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = $1)",
			"DELETE FROM mailboxes WHERE account_id = $1",
			"DELETE FROM spam_models WHERE account_id = $1",
			// The address leaves every alias that named it (an alias
			// left without a target goes with it).
			"DELETE FROM aliases WHERE target = (SELECT address FROM accounts WHERE id = $1)",
			"DELETE FROM accounts WHERE id = $1",
		}
		for _, q := range stmts {
			if _, err := w.exec(q, id); err != nil {
				return fmt.Errorf("remove account: %w", err)
			}
		}
		w.publish(id, 0)
		return bumpDirectory(w)
	})
	if err == nil {
		s.kickCollector()
	}
	return err
}

const accountCols = "id, address, domain_id, password_hash, display_name, disabled, created, quota_bytes"

func scanAccount(sc pgx.Row) (store.Account, error) {
	var a store.Account
	var created int64
	err := sc.Scan(&a.ID, &a.Address, &a.DomainID, &a.PasswordHash, &a.DisplayName, &a.Disabled, &created, &a.QuotaBytes)
	a.Created = time.Unix(created, 0)
	return a, err
}

func (s *Store) Account(ctx context.Context, address string) (store.Account, error) {
	addr := strings.ToLower(strings.TrimSpace(address))
	a, err := scanAccount(s.readRow(ctx, "SELECT "+accountCols+" FROM accounts WHERE address = $1", addr))
	if noRows(err) {
		return store.Account{}, fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
	}
	if err != nil {
		return store.Account{}, storeErr(fmt.Errorf("account %q: %w", addr, err))
	}
	return a, nil
}

func (s *Store) AccountByID(ctx context.Context, id int64) (store.Account, error) {
	a, err := scanAccount(s.readRow(ctx, "SELECT "+accountCols+" FROM accounts WHERE id = $1", id))
	if noRows(err) {
		return store.Account{}, fmt.Errorf("account %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Account{}, storeErr(fmt.Errorf("account %d: %w", id, err))
	}
	return a, nil
}

func (s *Store) Accounts(ctx context.Context) ([]store.Account, error) {
	return queryAccounts(ctx, s.pool)
}

func queryAccounts(ctx context.Context, q querier) ([]store.Account, error) {
	rows, _ := q.Query(ctx, "SELECT "+accountCols+" FROM accounts ORDER BY address")
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Account, error) { return scanAccount(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres store: list accounts: %w", err)
	}
	return out, nil
}

// AddAlias adds targets to an alias, creating it. The alias domain must
// exist; the address must not be an account. Targets already present are
// ignored.
func (s *Store) AddAlias(ctx context.Context, address string, targets []string) error {
	addr, dom, norm, err := store.NormalizeAlias(address, targets)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		did, err := domainID(w, dom)
		if err != nil {
			return err
		}
		var acct bool
		if err := w.queryRow("SELECT EXISTS (SELECT 1 FROM accounts WHERE address = $1)", addr).Scan(&acct); err != nil {
			return fmt.Errorf("look up account: %w", err)
		}
		if acct {
			return fmt.Errorf("alias %q: an account has this address: %w", addr, store.ErrExists)
		}
		if _, err := w.exec(`INSERT INTO aliases (address, target, domain_id) SELECT $1, t, $3 FROM unnest($2::text[]) t
			ON CONFLICT DO NOTHING`, addr, norm, did); err != nil {
			return fmt.Errorf("insert alias: %w", err)
		}
		return bumpDirectory(w)
	})
}

func (s *Store) RemoveAlias(ctx context.Context, address string) error {
	addr := strings.ToLower(strings.TrimSpace(address))
	return s.write(ctx, func(w *wtx) error {
		tag, err := w.exec("DELETE FROM aliases WHERE address = $1", addr)
		if err != nil {
			return fmt.Errorf("remove alias: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("alias %q: %w", addr, store.ErrNotFound)
		}
		return bumpDirectory(w)
	})
}

func (s *Store) Aliases(ctx context.Context) ([]store.Alias, error) {
	return queryAliases(ctx, s.pool)
}

func queryAliases(ctx context.Context, q querier) ([]store.Alias, error) {
	rows, _ := q.Query(ctx, "SELECT address, array_agg(target ORDER BY target) FROM aliases GROUP BY address ORDER BY address")
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Alias, error) {
		var a store.Alias
		err := r.Scan(&a.Address, &a.Targets)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres store: list aliases: %w", err)
	}
	return out, nil
}

// DirectoryVersion reads one row.
func (s *Store) DirectoryVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.readRow(ctx, "SELECT value FROM meta WHERE key = 'directory_version'").Scan(&v); err != nil {
		return 0, storeErr(fmt.Errorf("directory version: %w", err))
	}
	return v, nil
}

// Directory returns a consistent snapshot (one repeatable-read
// transaction).
func (s *Store) Directory(ctx context.Context) (store.Directory, error) {
	var d store.Directory
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT value FROM meta WHERE key = 'directory_version'").Scan(&d.Version); err != nil {
			return fmt.Errorf("directory version: %w", err)
		}
		var err error
		if d.Domains, err = queryDomains(ctx, tx); err != nil {
			return err
		}
		if d.Accounts, err = queryAccounts(ctx, tx); err != nil {
			return err
		}
		d.Aliases, err = queryAliases(ctx, tx)
		return err
	})
	return d, err
}

// readTx runs fn in a read-only transaction that sees one snapshot.
func (s *Store) readTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return storeErr(err)
	}
	defer tx.Rollback(context.Background())
	if err := fn(tx); err != nil {
		return storeErr(err)
	}
	return storeErr(tx.Commit(ctx))
}

// Stats counts what is stored. Blobs whose last reference went away but
// that are not collected yet are not counted.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	err := s.readRow(ctx, `SELECT
		(SELECT count(*) FROM blobs WHERE refcount > 0),
		(SELECT coalesce(sum(size), 0)::bigint FROM blobs WHERE refcount > 0),
		(SELECT count(*) FROM mail),
		(SELECT count(*) FROM accounts)`).Scan(&st.Blobs, &st.BlobBytes, &st.Messages, &st.Accounts)
	if err != nil {
		return store.Stats{}, storeErr(fmt.Errorf("stats: %w", err))
	}
	return st, nil
}
