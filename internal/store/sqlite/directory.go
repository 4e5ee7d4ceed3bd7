package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

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
	err := w.queryRow("SELECT id FROM domains WHERE name = ?", name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
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
		res, err := w.exec("INSERT INTO domains (name) VALUES (?)", d)
		if isConstraint(err) {
			return fmt.Errorf("domain %q: %w", d, store.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("insert domain: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert domain: %w", err)
		}
		out = store.Domain{ID: id, Name: d}
		return bumpDirectory(w)
	})
	return out, err
}

// RemoveDomain deletes a domain. It fails with ErrInvalid while accounts or
// aliases of the domain exist (remove them first; nothing is deleted
// implicitly).
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
		if err := w.queryRow("SELECT (SELECT count(*) FROM accounts WHERE domain_id = ?) + (SELECT count(*) FROM aliases WHERE domain_id = ?)", id, id).Scan(&n); err != nil {
			return fmt.Errorf("count domain users: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("domain %q has %d accounts or alias targets: %w", d, n, store.ErrInvalid)
		}
		if _, err := w.exec("DELETE FROM domains WHERE id = ?", id); err != nil {
			return fmt.Errorf("delete domain: %w", err)
		}
		return bumpDirectory(w)
	})
}

func (s *Store) Domains(ctx context.Context) ([]store.Domain, error) {
	return queryDomains(ctx, s.rdb)
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func queryDomains(ctx context.Context, q querier) ([]store.Domain, error) {
	rows, err := q.QueryContext(ctx, "SELECT id, name FROM domains ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list domains: %w", err)
	}
	defer rows.Close()
	var out []store.Domain
	for rows.Next() {
		var d store.Domain
		if err := rows.Scan(&d.ID, &d.Name); err != nil {
			return nil, fmt.Errorf("sqlite store: list domains: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list domains: %w", err)
	}
	return out, nil
}

// AddAccount creates the account and its default mailboxes. The address must
// not already be an account or an alias.
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
		var one int
		err = w.queryRow("SELECT 1 FROM aliases WHERE address = ? LIMIT 1", addr).Scan(&one)
		if err == nil {
			return fmt.Errorf("account %q: an alias has this address: %w", addr, store.ErrExists)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("look up alias: %w", err)
		}
		created := time.Now().Truncate(time.Second)
		res, err := w.exec("INSERT INTO accounts (address, domain_id, password_hash, created) VALUES (?, ?, ?, ?)",
			addr, did, passwordHash, created.Unix())
		if isConstraint(err) {
			return fmt.Errorf("account %q: %w", addr, store.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		for _, mb := range store.DefaultMailboxes {
			if _, err := createMailbox(w, id, mb.Name, mb.SpecialUse); err != nil {
				return err
			}
			if testBefore(13) { // no subscriptions table yet
				continue
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
		res, err := w.exec("UPDATE accounts SET password_hash = ? WHERE address = ?", passwordHash, addr)
		if err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
		}
		return bumpDirectory(w)
	})
}

// RemoveAccount deletes the account, its mailboxes and messages (their blobs
// are collected in the background).
func (s *Store) RemoveAccount(ctx context.Context, address string) error {
	addr := strings.ToLower(strings.TrimSpace(address))
	err := s.write(ctx, func(w *wtx) error {
		var id int64
		err := w.queryRow("SELECT id FROM accounts WHERE address = ?", addr).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("look up account: %w", err)
		}
		stmts := []string{
			`UPDATE blobs SET refcount = refcount - c.n FROM
				(SELECT blob_id, count(*) AS n FROM mail
				 WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = ?1)
				 GROUP BY blob_id) AS c
			 WHERE blobs.id = c.blob_id`,
			"DELETE FROM mail WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = ?1)",
			"DELETE FROM expunged WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = ?1)",
			"DELETE FROM mailboxes WHERE account_id = ?1",
			"DELETE FROM subscriptions WHERE account_id = ?1",
			"DELETE FROM accounts WHERE id = ?1",
			// The address leaves every alias that named it (an alias of
			// that target alone goes with its last row).
			"DELETE FROM aliases WHERE target = ?2",
		}
		for _, q := range stmts {
			if _, err := w.exec(q, id, addr); err != nil {
				return fmt.Errorf("remove account: %w", err)
			}
		}
		s.forgetRecent(0) // its mailboxes' IDs may come again
		w.publish(id, 0)
		return bumpDirectory(w)
	})
	if err == nil {
		s.kickCollector()
	}
	return err
}

const accountCols = "id, address, domain_id, password_hash, display_name, disabled, created, quota_bytes"

func scanAccount(sc interface{ Scan(...any) error }) (store.Account, error) {
	var a store.Account
	var created int64
	err := sc.Scan(&a.ID, &a.Address, &a.DomainID, &a.PasswordHash, &a.DisplayName, &a.Disabled, &created, &a.QuotaBytes)
	a.Created = time.Unix(created, 0)
	return a, err
}

func (s *Store) Account(ctx context.Context, address string) (store.Account, error) {
	addr := strings.ToLower(strings.TrimSpace(address))
	a, err := scanAccount(s.readRow(ctx, "SELECT "+accountCols+" FROM accounts WHERE address = ?", addr))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Account{}, fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
	}
	if err != nil {
		return store.Account{}, fmt.Errorf("sqlite store: account %q: %w", addr, err)
	}
	return a, nil
}

func (s *Store) AccountByID(ctx context.Context, id int64) (store.Account, error) {
	a, err := scanAccount(s.rdb.QueryRowContext(ctx, "SELECT "+accountCols+" FROM accounts WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Account{}, fmt.Errorf("account %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Account{}, fmt.Errorf("sqlite store: account %d: %w", id, err)
	}
	return a, nil
}

func (s *Store) Accounts(ctx context.Context) ([]store.Account, error) {
	return queryAccounts(ctx, s.rdb)
}

func queryAccounts(ctx context.Context, q querier) ([]store.Account, error) {
	rows, err := q.QueryContext(ctx, "SELECT "+accountCols+" FROM accounts ORDER BY address")
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list accounts: %w", err)
	}
	defer rows.Close()
	var out []store.Account
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: list accounts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list accounts: %w", err)
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
		var one int
		err = w.queryRow("SELECT 1 FROM accounts WHERE address = ?", addr).Scan(&one)
		if err == nil {
			return fmt.Errorf("alias %q: an account has this address: %w", addr, store.ErrExists)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("look up account: %w", err)
		}
		for _, t := range norm {
			if _, err := w.exec("INSERT OR IGNORE INTO aliases (address, target, domain_id) VALUES (?, ?, ?)", addr, t, did); err != nil {
				return fmt.Errorf("insert alias: %w", err)
			}
		}
		return bumpDirectory(w)
	})
}

func (s *Store) RemoveAlias(ctx context.Context, address string) error {
	addr := strings.ToLower(strings.TrimSpace(address))
	return s.write(ctx, func(w *wtx) error {
		res, err := w.exec("DELETE FROM aliases WHERE address = ?", addr)
		if err != nil {
			return fmt.Errorf("remove alias: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("alias %q: %w", addr, store.ErrNotFound)
		}
		return bumpDirectory(w)
	})
}

func (s *Store) Aliases(ctx context.Context) ([]store.Alias, error) {
	return queryAliases(ctx, s.rdb)
}

func queryAliases(ctx context.Context, q querier) ([]store.Alias, error) {
	rows, err := q.QueryContext(ctx, "SELECT address, target FROM aliases ORDER BY address, target")
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list aliases: %w", err)
	}
	defer rows.Close()
	var out []store.Alias
	for rows.Next() {
		var addr, target string
		if err := rows.Scan(&addr, &target); err != nil {
			return nil, fmt.Errorf("sqlite store: list aliases: %w", err)
		}
		if n := len(out); n > 0 && out[n-1].Address == addr {
			out[n-1].Targets = append(out[n-1].Targets, target)
		} else {
			out = append(out, store.Alias{Address: addr, Targets: []string{target}})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list aliases: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out, nil
}

// DirectoryVersion reads one row.
func (s *Store) DirectoryVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.rdb.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'directory_version'").Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlite store: directory version: %w", err)
	}
	return v, nil
}

// Directory returns a consistent snapshot (one read transaction).
func (s *Store) Directory(ctx context.Context) (store.Directory, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.Directory{}, fmt.Errorf("sqlite store: directory: %w", err)
	}
	defer tx.Rollback()
	var d store.Directory
	if err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'directory_version'").Scan(&d.Version); err != nil {
		return store.Directory{}, fmt.Errorf("sqlite store: directory version: %w", err)
	}
	if d.Domains, err = queryDomains(ctx, tx); err != nil {
		return store.Directory{}, err
	}
	if d.Accounts, err = queryAccounts(ctx, tx); err != nil {
		return store.Directory{}, err
	}
	if d.Aliases, err = queryAliases(ctx, tx); err != nil {
		return store.Directory{}, err
	}
	return d, nil
}

// Stats counts what is stored. Blobs whose last reference went away but that
// are not collected yet are not counted.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var st store.Stats
	err := s.rdb.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM blobs WHERE refcount > 0),
		(SELECT coalesce(sum(size), 0) FROM blobs WHERE refcount > 0),
		(SELECT count(*) FROM mail),
		(SELECT count(*) FROM accounts)`).Scan(&st.Blobs, &st.BlobBytes, &st.Messages, &st.Accounts)
	if err != nil {
		return store.Stats{}, fmt.Errorf("sqlite store: stats: %w", err)
	}
	return st, nil
}
