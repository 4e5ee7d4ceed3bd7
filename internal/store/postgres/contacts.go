package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// Address books (store.Contacts, schema step 3): one row a card, keyed by
// account and href, the UID unique per account; every write of an
// account's cards first takes the next version from its address_books
// row, which also makes the account's card writers on every node take
// turns (the row's lock is held to the commit).

const contactColumns = "href, uid, card, name, emails, categories, version, modified"

func scanContact(r pgx.Row) (store.Contact, error) {
	var c store.Contact
	var emails, groups string
	var modified int64
	if err := r.Scan(&c.Href, &c.UID, &c.Card, &c.Name, &emails, &groups, &c.Version, &modified); err != nil {
		return c, err
	}
	c.Emails, c.Groups = splitLines(emails), splitLines(groups)
	c.Modified = time.UnixMilli(modified)
	return c, nil
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Contacts lists an account's cards by name.
func (s *Store) Contacts(ctx context.Context, accountID int64) ([]store.Contact, error) {
	rows, _ := s.pool.Query(ctx, "SELECT "+contactColumns+" FROM contacts WHERE account_id = $1 ORDER BY name, href", accountID)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Contact, error) { return scanContact(r) })
	if err != nil {
		return nil, storeErr(fmt.Errorf("contacts of account %d: %w", accountID, err))
	}
	return out, nil
}

// Contact returns one card.
func (s *Store) Contact(ctx context.Context, accountID int64, href string) (store.Contact, error) {
	c, err := scanContact(s.readRow(ctx, "SELECT "+contactColumns+" FROM contacts WHERE account_id = $1 AND href = $2", accountID, href))
	if noRows(err) {
		return c, fmt.Errorf("contact %q: %w", href, store.ErrNotFound)
	}
	if err != nil {
		return c, storeErr(fmt.Errorf("contact %q of account %d: %w", href, accountID, err))
	}
	return c, nil
}

// PutContact creates or replaces a card under its version condition.
func (s *Store) PutContact(ctx context.Context, accountID int64, c store.Contact, ifVersion int64) (store.Contact, error) {
	if !store.ValidContact(c) || ifVersion < store.AnyVersion {
		return c, fmt.Errorf("contact %q: %w", c.Href, store.ErrInvalid)
	}
	if c.Card == nil {
		c.Card = []byte{}
	}
	version, modified := c.Version, c.Modified
	err := s.write(ctx, func(w *wtx) error {
		c.Version, c.Modified = version, modified
		next, err := nextContactVersion(w, accountID)
		if err != nil {
			return err
		}
		var cur int64
		err = w.queryRow("SELECT version FROM contacts WHERE account_id = $1 AND href = $2", accountID, c.Href).Scan(&cur)
		exists := err == nil
		if err != nil && !noRows(err) {
			return err
		}
		switch {
		case ifVersion == 0 && exists, ifVersion > 0 && exists && cur != ifVersion:
			return store.ErrModified
		case ifVersion > 0 && !exists:
			return store.ErrNotFound
		}
		var other bool
		if err := w.queryRow("SELECT EXISTS (SELECT 1 FROM contacts WHERE account_id = $1 AND uid = $2 AND href <> $3)",
			accountID, c.UID, c.Href).Scan(&other); err != nil {
			return err
		}
		if other {
			return store.ErrExists
		}
		c.Version = next
		c.Modified = time.UnixMilli(time.Now().UnixMilli())
		_, err = w.exec(`INSERT INTO contacts (account_id, `+contactColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (account_id, href) DO UPDATE SET uid = excluded.uid, card = excluded.card, name = excluded.name,
			emails = excluded.emails, categories = excluded.categories, version = excluded.version, modified = excluded.modified`,
			accountID, c.Href, c.UID, c.Card, c.Name, strings.Join(c.Emails, "\n"), strings.Join(c.Groups, "\n"),
			c.Version, c.Modified.UnixMilli())
		if isUnique(err) {
			return store.ErrExists
		}
		return err
	})
	if err != nil {
		return c, storeErr(fmt.Errorf("put contact %q of account %d: %w", c.Href, accountID, err))
	}
	return c, nil
}

// nextContactVersion takes the account's next card version and holds its
// address book's row to the commit; ErrNotFound for an unknown account.
func nextContactVersion(w *wtx, accountID int64) (int64, error) {
	var v int64
	err := w.queryRow(`INSERT INTO address_books (account_id, version) VALUES ($1, 1)
		ON CONFLICT (account_id) DO UPDATE SET version = address_books.version + 1 RETURNING version`, accountID).Scan(&v)
	if sqlState(err) == codeForeignKeyViolation {
		return 0, store.ErrNotFound
	}
	return v, err
}

// DeleteContact removes a card under its version condition.
func (s *Store) DeleteContact(ctx context.Context, accountID int64, href string, ifVersion int64) error {
	err := s.write(ctx, func(w *wtx) error {
		if _, err := nextContactVersion(w, accountID); err != nil {
			return err
		}
		var cur int64
		err := w.queryRow("SELECT version FROM contacts WHERE account_id = $1 AND href = $2", accountID, href).Scan(&cur)
		if noRows(err) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if ifVersion != store.AnyVersion && cur != ifVersion {
			return store.ErrModified
		}
		_, err = w.exec("DELETE FROM contacts WHERE account_id = $1 AND href = $2", accountID, href)
		return err
	})
	if err != nil {
		return storeErr(fmt.Errorf("delete contact %q of account %d: %w", href, accountID, err))
	}
	return nil
}
