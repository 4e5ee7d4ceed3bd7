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

// mailboxCols are the columns scanMailbox reads from the mailboxes table:
// what the write paths need.
const mailboxCols = "id, account_id, name, special_use, uidvalidity, uidnext, highestmodseq"

func scanMailbox(sc interface{ Scan(...any) error }) (store.Mailbox, error) {
	var m store.Mailbox
	err := sc.Scan(&m.ID, &m.AccountID, &m.Name, &m.SpecialUse, &m.UIDValidity, &m.UIDNext, &m.HighestModSeq)
	return m, err
}

// mailboxFullCols are mailboxCols and what only clients ask for, the
// subscription (subscriptions.go) and FirstRecentUID (recent.go), which
// scanMailboxFull reads: the mailboxes table, not aliased.
const mailboxFullCols = mailboxCols + ", " + subscribedCol + ", first_recent_uid"

func scanMailboxFull(sc interface{ Scan(...any) error }) (store.Mailbox, error) {
	var m store.Mailbox
	err := sc.Scan(&m.ID, &m.AccountID, &m.Name, &m.SpecialUse, &m.UIDValidity, &m.UIDNext, &m.HighestModSeq,
		&m.Subscribed, &m.FirstRecentUID)
	return m, err
}

// nextUIDValidity returns a UIDVALIDITY never handed out before in this
// database: at least the current Unix time and greater than the last one, so
// a mailbox deleted and created again under the same name gets a new one
// (RFC 9051 §2.3.1.1), also after a restore from an older backup.
func nextUIDValidity(w *wtx) (uint32, error) {
	var last int64
	if err := w.queryRow("SELECT value FROM meta WHERE key = 'uidvalidity'").Scan(&last); err != nil {
		return 0, fmt.Errorf("read uidvalidity counter: %w", err)
	}
	v := max(last+1, time.Now().Unix())
	if v > 0xffffffff || v <= 0 { // after 2106: wrap around, skipping 0
		v = 1
	}
	if _, err := w.exec("UPDATE meta SET value = ? WHERE key = 'uidvalidity'", v); err != nil {
		return 0, fmt.Errorf("update uidvalidity counter: %w", err)
	}
	return uint32(v), nil
}

// mailboxByName finds a mailbox of an account inside a write request.
func mailboxByName(w *wtx, accountID int64, name string) (store.Mailbox, error) {
	m, err := scanMailbox(w.queryRow("SELECT "+mailboxCols+" FROM mailboxes WHERE account_id = ? AND name = ?", accountID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Mailbox{}, fmt.Errorf("mailbox %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("look up mailbox %q: %w", name, err)
	}
	return m, nil
}

// mailboxByID finds a mailbox inside a write request.
func mailboxByID(w *wtx, id int64) (store.Mailbox, error) {
	m, err := scanMailbox(w.queryRow("SELECT "+mailboxCols+" FROM mailboxes WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Mailbox{}, fmt.Errorf("mailbox %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("look up mailbox %d: %w", id, err)
	}
	return m, nil
}

// createMailbox inserts a mailbox (name already normalised) and any missing
// superior names (RFC 9051 §6.3.4: the server SHOULD create them). It fails
// with ErrExists if the mailbox itself exists.
func createMailbox(w *wtx, accountID int64, name, specialUse string) (store.Mailbox, error) {
	for _, p := range store.ParentNames(name) {
		if _, err := mailboxByName(w, accountID, p); errors.Is(err, store.ErrNotFound) {
			if _, err := insertMailbox(w, accountID, p, store.SpecialNone); err != nil {
				return store.Mailbox{}, err
			}
		} else if err != nil {
			return store.Mailbox{}, err
		}
	}
	return insertMailbox(w, accountID, name, specialUse)
}

func insertMailbox(w *wtx, accountID int64, name, specialUse string) (store.Mailbox, error) {
	uv, err := nextUIDValidity(w)
	if err != nil {
		return store.Mailbox{}, err
	}
	var id int64
	err = w.queryRow("INSERT INTO mailboxes (id, account_id, name, special_use, uidvalidity, uidnext, highestmodseq) VALUES ("+
		nextIDExpr("mailbox_last_id")+", ?, ?, ?, ?, 1, 1) RETURNING id", accountID, name, specialUse, uv).Scan(&id)
	if isConstraint(err) {
		return store.Mailbox{}, fmt.Errorf("mailbox %q: %w", name, store.ErrExists)
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("insert mailbox %q: %w", name, err)
	}
	if err := takeID(w, "mailbox_last_id", id); err != nil {
		return store.Mailbox{}, err
	}
	w.publish(accountID, 0)
	return store.Mailbox{ID: id, AccountID: accountID, Name: name, SpecialUse: specialUse,
		UIDValidity: uv, UIDNext: 1, HighestModSeq: 1, FirstRecentUID: 1}, nil
}

// accountExists checks the account inside a write request.
func accountExists(w *wtx, accountID int64) error {
	var one int
	err := w.queryRow("SELECT 1 FROM accounts WHERE id = ?", accountID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("account %d: %w", accountID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("look up account %d: %w", accountID, err)
	}
	return nil
}

func (s *Store) Mailboxes(ctx context.Context, accountID int64) ([]store.Mailbox, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+mailboxFullCols+" FROM mailboxes WHERE account_id = ? ORDER BY name", accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: list mailboxes: %w", err)
	}
	defer rows.Close()
	var out []store.Mailbox
	for rows.Next() {
		m, err := scanMailboxFull(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: list mailboxes: %w", err)
		}
		m.FirstRecentUID = s.recentFloor(m.ID, m.FirstRecentUID)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: list mailboxes: %w", err)
	}
	return out, nil
}

func (s *Store) Mailbox(ctx context.Context, accountID int64, name string) (store.Mailbox, error) {
	n, err := store.NormalizeMailboxName(name)
	if err != nil {
		return store.Mailbox{}, err
	}
	// Looked up for every APPEND, COPY and SELECT: a cached statement.
	m, err := scanMailboxFull(s.readRow(ctx, "SELECT "+mailboxFullCols+" FROM mailboxes WHERE account_id = ? AND name = ?", accountID, n))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Mailbox{}, fmt.Errorf("mailbox %q: %w", n, store.ErrNotFound)
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("sqlite store: mailbox %q: %w", n, err)
	}
	m.FirstRecentUID = s.recentFloor(m.ID, m.FirstRecentUID)
	return m, nil
}

func (s *Store) MailboxStatus(ctx context.Context, accountID int64, name string) (store.MailboxStatus, error) {
	n, err := store.NormalizeMailboxName(name)
	if err != nil {
		return store.MailboxStatus{}, err
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.MailboxStatus{}, fmt.Errorf("sqlite store: mailbox status: %w", err)
	}
	defer tx.Rollback()
	m, err := scanMailboxFull(tx.QueryRowContext(ctx, "SELECT "+mailboxFullCols+" FROM mailboxes WHERE account_id = ? AND name = ?", accountID, n))
	if errors.Is(err, sql.ErrNoRows) {
		return store.MailboxStatus{}, fmt.Errorf("mailbox %q: %w", n, store.ErrNotFound)
	}
	if err != nil {
		return store.MailboxStatus{}, fmt.Errorf("sqlite store: mailbox %q: %w", n, err)
	}
	m.FirstRecentUID = s.recentFloor(m.ID, m.FirstRecentUID)
	st := store.MailboxStatus{Mailbox: m}
	err = tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(flags & ? = 0), 0), coalesce(sum(b.size), 0),
		coalesce(sum(uid >= ?), 0)
		FROM mail JOIN blobs b ON b.id = mail.blob_id WHERE mailbox_id = ?`, store.FlagSeen, m.FirstRecentUID, m.ID).
		Scan(&st.Messages, &st.Unseen, &st.Size, &st.Recent)
	if err != nil {
		return store.MailboxStatus{}, fmt.Errorf("sqlite store: mailbox status %q: %w", n, err)
	}
	return st, nil
}

// CreateMailbox creates a mailbox and any missing superior names.
func (s *Store) CreateMailbox(ctx context.Context, accountID int64, name, specialUse string) (store.Mailbox, error) {
	n, err := store.NormalizeMailboxName(name)
	if err != nil {
		return store.Mailbox{}, err
	}
	if !store.ValidSpecialUse(specialUse) {
		return store.Mailbox{}, fmt.Errorf("special-use %q: %w", specialUse, store.ErrInvalid)
	}
	var out store.Mailbox
	err = s.write(ctx, func(w *wtx) error {
		if err := accountExists(w, accountID); err != nil {
			return err
		}
		m, err := createMailbox(w, accountID, n, specialUse)
		if err != nil {
			return err
		}
		out = m
		// The name may have been subscribed before it existed.
		err = w.queryRow("SELECT "+subscribedCol+" FROM mailboxes WHERE id = ?", m.ID).Scan(&out.Subscribed)
		if err != nil {
			return fmt.Errorf("read subscription of %q: %w", n, err)
		}
		return nil
	})
	return out, err
}

// DeleteMailbox removes a mailbox and its messages. INBOX, special-use
// mailboxes and mailboxes with children fail with ErrMailboxInUse.
func (s *Store) DeleteMailbox(ctx context.Context, accountID int64, name string) error {
	n, err := store.NormalizeMailboxName(name)
	if err != nil {
		return err
	}
	if n == "INBOX" {
		return fmt.Errorf("mailbox INBOX cannot be deleted: %w", store.ErrMailboxInUse)
	}
	err = s.write(ctx, func(w *wtx) error {
		m, err := mailboxByName(w, accountID, n)
		if err != nil {
			return err
		}
		if m.SpecialUse != store.SpecialNone {
			return fmt.Errorf("mailbox %q is special-use %s: %w", n, m.SpecialUse, store.ErrMailboxInUse)
		}
		var children int
		lo, hi := store.ChildNameRange(n)
		if err := w.queryRow("SELECT count(*) FROM mailboxes WHERE account_id = ? AND name >= ? AND name < ?",
			accountID, lo, hi).Scan(&children); err != nil {
			return fmt.Errorf("count child mailboxes: %w", err)
		}
		if children > 0 {
			return fmt.Errorf("mailbox %q has children: %w", n, store.ErrMailboxInUse)
		}
		if err := releaseMailboxMail(w, m.ID); err != nil {
			return err
		}
		if _, err := w.exec("DELETE FROM expunged WHERE mailbox_id = ?", m.ID); err != nil {
			return fmt.Errorf("delete tombstones: %w", err)
		}
		if _, err := w.exec("DELETE FROM mailboxes WHERE id = ?", m.ID); err != nil {
			return fmt.Errorf("delete mailbox: %w", err)
		}
		s.forgetRecent(m.ID)
		w.publish(accountID, m.ID)
		w.publish(accountID, 0)
		return nil
	})
	if err == nil {
		s.kickCollector()
	}
	return err
}

// releaseMailboxMail deletes every message row of a mailbox and decrements
// the blob reference counts (files are collected later).
func releaseMailboxMail(w *wtx, mailboxID int64) error {
	if _, err := w.exec(`UPDATE blobs SET refcount = refcount - c.n FROM
		(SELECT blob_id, count(*) AS n FROM mail WHERE mailbox_id = ? GROUP BY blob_id) AS c
		WHERE blobs.id = c.blob_id`, mailboxID); err != nil {
		return fmt.Errorf("release blobs: %w", err)
	}
	if _, err := w.exec("DELETE FROM mail WHERE mailbox_id = ?", mailboxID); err != nil {
		return fmt.Errorf("delete messages: %w", err)
	}
	return nil
}

// RenameMailbox renames a mailbox with its children. Renaming INBOX moves
// its messages to a new mailbox and leaves INBOX empty; INBOX's children stay
// (RFC 9051 §6.3.6). Missing superior names of the new name are created.
func (s *Store) RenameMailbox(ctx context.Context, accountID int64, from, to string) error {
	f, err := store.NormalizeMailboxName(from)
	if err != nil {
		return err
	}
	t, err := store.NormalizeMailboxName(to)
	if err != nil {
		return err
	}
	if t == "INBOX" {
		return fmt.Errorf("mailbox INBOX: %w", store.ErrExists)
	}
	if f == t {
		return fmt.Errorf("rename %q to itself: %w", f, store.ErrExists)
	}
	if f == "INBOX" {
		return s.renameInbox(ctx, accountID, t)
	}
	return s.write(ctx, func(w *wtx) error {
		src, err := mailboxByName(w, accountID, f)
		if err != nil {
			return err
		}
		// The mailbox and its children, old name → new name.
		lo, hi := store.ChildNameRange(f)
		rows, err := w.query("SELECT id, name FROM mailboxes WHERE account_id = ? AND (name = ? OR (name >= ? AND name < ?))",
			accountID, f, lo, hi)
		if err != nil {
			return fmt.Errorf("list mailboxes to rename: %w", err)
		}
		renames := map[int64]string{}
		moving := map[string]bool{}
		for rows.Next() {
			var id int64
			var name string
			if err := rows.Scan(&id, &name); err != nil {
				rows.Close()
				return fmt.Errorf("list mailboxes to rename: %w", err)
			}
			renames[id] = t + strings.TrimPrefix(name, f)
			moving[name] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("list mailboxes to rename: %w", err)
		}
		for _, nn := range renames {
			if moving[nn] {
				continue // freed by this rename
			}
			if _, err := mailboxByName(w, accountID, nn); err == nil {
				return fmt.Errorf("mailbox %q: %w", nn, store.ErrExists)
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		// Two steps, so that names swapping inside the set never collide.
		for id := range renames {
			if _, err := w.exec("UPDATE mailboxes SET name = ? WHERE id = ?", fmt.Sprintf("\x00rename-%d", id), id); err != nil {
				return fmt.Errorf("rename mailbox: %w", err)
			}
		}
		for id, nn := range renames {
			if _, err := w.exec("UPDATE mailboxes SET name = ? WHERE id = ?", nn, id); err != nil {
				return fmt.Errorf("rename mailbox: %w", err)
			}
		}
		if err := renameSubscriptions(w, accountID, f, t); err != nil {
			return err
		}
		for _, p := range store.ParentNames(t) {
			if _, err := mailboxByName(w, accountID, p); errors.Is(err, store.ErrNotFound) {
				if _, err := insertMailbox(w, accountID, p, store.SpecialNone); err != nil {
					return err
				}
			} else if err != nil {
				return err
			}
		}
		w.publish(accountID, src.ID)
		w.publish(accountID, 0)
		return nil
	})
}

// renameInbox implements RENAME INBOX (RFC 9051 §6.3.6): a new mailbox gets
// all of INBOX's messages (with new UIDs under its own UIDVALIDITY); INBOX is
// left empty, its UIDNEXT unchanged, and its messages are expunged with
// tombstones so that clients with INBOX selected see them go.
func (s *Store) renameInbox(ctx context.Context, accountID int64, to string) error {
	return s.write(ctx, func(w *wtx) error {
		inbox, err := mailboxByName(w, accountID, "INBOX")
		if err != nil {
			return err
		}
		dst, err := createMailbox(w, accountID, to, store.SpecialNone)
		if err != nil {
			return err
		}
		rows, err := mailRows(w, inbox.ID, nil)
		if err != nil {
			return err
		}
		if _, err := copyMail(w, rows, dst); err != nil {
			return err
		}
		return expungeMail(w, inbox, rows)
	})
}

// nextIDExpr is the SQL for the ID of a new row named by the counter key
// of meta (schema step 15: IDs never handed out twice). Before that step
// (a test's older schema) it is NULL, and SQLite picks the rowid.
func nextIDExpr(key string) string {
	return "(SELECT value + 1 FROM meta WHERE key = '" + key + "')"
}

// takeID records id, the ID a new row got from nextIDExpr, in the counter
// key, in the same write request.
func takeID(w *wtx, key string, id int64) error {
	if _, err := w.exec("UPDATE meta SET value = ? WHERE key = ? AND value < ?", id, key, id); err != nil {
		return fmt.Errorf("update %s counter: %w", key, err)
	}
	return nil
}
