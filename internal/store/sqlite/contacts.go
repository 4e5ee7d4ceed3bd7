package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"pimail/internal/store"
)

// Address books (store.Contacts, schema version 14): one row a card,
// keyed by account and href, with a unique UID per account; a card's
// version is taken from its account's counter in address_books.

const contactColumns = "href, uid, card, name, emails, categories, version, modified"

func scanContact(sc interface{ Scan(...any) error }) (store.Contact, error) {
	var c store.Contact
	var emails, groups string
	var modified int64
	if err := sc.Scan(&c.Href, &c.UID, &c.Card, &c.Name, &emails, &groups, &c.Version, &modified); err != nil {
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
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+contactColumns+" FROM contacts WHERE account_id = ? ORDER BY name, href", accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: contacts of account %d: %w", accountID, err)
	}
	defer rows.Close()
	var out []store.Contact
	for rows.Next() {
		c, err := scanContact(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: contacts of account %d: %w", accountID, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: contacts of account %d: %w", accountID, err)
	}
	return out, nil
}

// Contact returns one card.
func (s *Store) Contact(ctx context.Context, accountID int64, href string) (store.Contact, error) {
	c, err := scanContact(s.readRow(ctx, "SELECT "+contactColumns+" FROM contacts WHERE account_id = ? AND href = ?", accountID, href))
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("contact %q: %w", href, store.ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("sqlite store: contact %q of account %d: %w", href, accountID, err)
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
	err := s.write(ctx, func(w *wtx) error {
		var cur int64
		err := w.queryRow("SELECT version FROM contacts WHERE account_id = ? AND href = ?", accountID, c.Href).Scan(&cur)
		exists := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		switch {
		case ifVersion == 0 && exists, ifVersion > 0 && exists && cur != ifVersion:
			return store.ErrModified
		case ifVersion > 0 && !exists:
			return store.ErrNotFound
		}
		var other int
		if err := w.queryRow("SELECT count(*) FROM contacts WHERE account_id = ? AND uid = ? AND href <> ?",
			accountID, c.UID, c.Href).Scan(&other); err != nil {
			return err
		}
		if other > 0 {
			return store.ErrExists
		}
		if c.Version, err = nextContactVersion(w, accountID); err != nil {
			return err
		}
		c.Modified = time.UnixMilli(time.Now().UnixMilli())
		_, err = w.exec(`INSERT INTO contacts (account_id, `+contactColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (account_id, href) DO UPDATE SET uid = excluded.uid, card = excluded.card, name = excluded.name,
			emails = excluded.emails, categories = excluded.categories, version = excluded.version, modified = excluded.modified`,
			accountID, c.Href, c.UID, c.Card, c.Name, strings.Join(c.Emails, "\n"), strings.Join(c.Groups, "\n"),
			c.Version, c.Modified.UnixMilli())
		return err
	})
	if err != nil {
		return c, fmt.Errorf("put contact %q of account %d: %w", c.Href, accountID, err)
	}
	return c, nil
}

// nextContactVersion takes the account's next card version; ErrNotFound
// for an unknown account.
func nextContactVersion(w *wtx, accountID int64) (int64, error) {
	_, err := w.exec(`INSERT INTO address_books (account_id, version) VALUES (?, 1)
		ON CONFLICT (account_id) DO UPDATE SET version = version + 1`, accountID)
	if isConstraint(err) {
		return 0, store.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	var v int64
	err = w.queryRow("SELECT version FROM address_books WHERE account_id = ?", accountID).Scan(&v)
	return v, err
}

// DeleteContact removes a card under its version condition.
func (s *Store) DeleteContact(ctx context.Context, accountID int64, href string, ifVersion int64) error {
	err := s.write(ctx, func(w *wtx) error {
		var cur int64
		err := w.queryRow("SELECT version FROM contacts WHERE account_id = ? AND href = ?", accountID, href).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if ifVersion != store.AnyVersion && cur != ifVersion {
			return store.ErrModified
		}
		if _, err := nextContactVersion(w, accountID); err != nil {
			return err
		}
		_, err = w.exec("DELETE FROM contacts WHERE account_id = ? AND href = ?", accountID, href)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete contact %q of account %d: %w", href, accountID, err)
	}
	return nil
}
