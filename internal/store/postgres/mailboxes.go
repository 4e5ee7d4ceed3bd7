package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// mailboxCols are the columns scanMailbox reads, from the mailboxes table
// (not aliased): the subscription is a row of subscriptions.
const mailboxCols = `id, account_id, name, special_use,
	EXISTS (SELECT 1 FROM subscriptions s WHERE s.account_id = mailboxes.account_id AND s.name = mailboxes.name),
	uidvalidity, uidnext, highestmodseq, first_recent_uid`

func scanMailbox(sc pgx.Row) (store.Mailbox, error) {
	var m store.Mailbox
	err := sc.Scan(&m.ID, &m.AccountID, &m.Name, &m.SpecialUse, &m.Subscribed, &m.UIDValidity, &m.UIDNext, &m.HighestModSeq,
		&m.FirstRecentUID)
	return m, err
}

// nextUIDValidity returns a UIDVALIDITY never handed out before in this
// database: at least the current Unix time and greater than the last one,
// so a mailbox deleted and created again under the same name gets a new
// one (RFC 9051 §2.3.1.1). The counter's row lock orders concurrent
// creations on every node.
func nextUIDValidity(w *wtx) (uint32, error) {
	var v int64
	err := w.queryRow(`UPDATE meta SET value = CASE WHEN greatest(value + 1, $1) > 4294967295 THEN 1
		ELSE greatest(value + 1, $1) END WHERE key = 'uidvalidity' RETURNING value`, time.Now().Unix()).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("take uidvalidity: %w", err)
	}
	return uint32(v), nil
}

// mailboxByName finds a mailbox of an account inside a transaction.
func mailboxByName(w *wtx, accountID int64, name string) (store.Mailbox, error) {
	m, err := scanMailbox(w.queryRow("SELECT "+mailboxCols+" FROM mailboxes WHERE account_id = $1 AND name = $2", accountID, name))
	if noRows(err) {
		return store.Mailbox{}, fmt.Errorf("mailbox %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("look up mailbox %q: %w", name, err)
	}
	return m, nil
}

// mailboxByID finds a mailbox inside a transaction.
func mailboxByID(w *wtx, id int64) (store.Mailbox, error) {
	m, err := scanMailbox(w.queryRow("SELECT "+mailboxCols+" FROM mailboxes WHERE id = $1", id))
	if noRows(err) {
		return store.Mailbox{}, fmt.Errorf("mailbox %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("look up mailbox %d: %w", id, err)
	}
	return m, nil
}

// createMailbox inserts a mailbox (name already normalised) and any
// missing superior names (RFC 9051 §6.3.4). ErrExists if the mailbox
// itself exists.
func createMailbox(w *wtx, accountID int64, name, specialUse string) (store.Mailbox, error) {
	if err := createParents(w, accountID, name); err != nil {
		return store.Mailbox{}, err
	}
	m, err := insertMailbox(w, accountID, name, specialUse)
	if errors.Is(err, errMailboxTaken) {
		return m, fmt.Errorf("mailbox %q: %w", name, store.ErrExists)
	}
	return m, err
}

// createParents creates the missing superior names of name.
func createParents(w *wtx, accountID int64, name string) error {
	for _, p := range store.ParentNames(name) {
		if _, err := insertMailbox(w, accountID, p, store.SpecialNone); err != nil && !errors.Is(err, errMailboxTaken) {
			return err
		}
	}
	return nil
}

var errMailboxTaken = errors.New("mailbox name taken")

// insertMailbox inserts one mailbox; errMailboxTaken when the account has
// one of that name (ON CONFLICT: also when another node creates it at
// the same time, without aborting the transaction).
func insertMailbox(w *wtx, accountID int64, name, specialUse string) (store.Mailbox, error) {
	var taken bool
	if err := w.queryRow("SELECT EXISTS (SELECT 1 FROM mailboxes WHERE account_id = $1 AND name = $2)", accountID, name).Scan(&taken); err != nil {
		return store.Mailbox{}, fmt.Errorf("look up mailbox %q: %w", name, err)
	}
	if taken {
		return store.Mailbox{}, errMailboxTaken
	}
	uv, err := nextUIDValidity(w)
	if err != nil {
		return store.Mailbox{}, err
	}
	var id int64
	var subscribed bool
	err = w.queryRow(`INSERT INTO mailboxes (account_id, name, special_use, uidvalidity, uidnext, highestmodseq)
		VALUES ($1, $2, $3, $4, 1, 1) ON CONFLICT (account_id, name) DO NOTHING
		RETURNING id, EXISTS (SELECT 1 FROM subscriptions WHERE account_id = $1 AND name = $2)`,
		accountID, name, specialUse, uv).Scan(&id, &subscribed)
	if noRows(err) {
		return store.Mailbox{}, errMailboxTaken
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("insert mailbox %q: %w", name, err)
	}
	w.publish(accountID, 0)
	return store.Mailbox{ID: id, AccountID: accountID, Name: name, SpecialUse: specialUse,
		Subscribed: subscribed, UIDValidity: uv, UIDNext: 1, HighestModSeq: 1, FirstRecentUID: 1}, nil
}

// lockAccount checks that the account exists and locks its row until the
// commit (so that it is not removed meanwhile).
func lockAccount(w *wtx, accountID int64) error {
	var one int
	err := w.queryRow("SELECT 1 FROM accounts WHERE id = $1 FOR SHARE", accountID).Scan(&one)
	if noRows(err) {
		return fmt.Errorf("account %d: %w", accountID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("look up account %d: %w", accountID, err)
	}
	return nil
}

func (s *Store) Mailboxes(ctx context.Context, accountID int64) ([]store.Mailbox, error) {
	rows, _ := s.pool.Query(ctx, "SELECT "+mailboxCols+" FROM mailboxes WHERE account_id = $1 ORDER BY name", accountID)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Mailbox, error) { return scanMailbox(r) })
	if err != nil {
		return nil, storeErr(fmt.Errorf("list mailboxes: %w", err))
	}
	return out, nil
}

func (s *Store) Mailbox(ctx context.Context, accountID int64, name string) (store.Mailbox, error) {
	n, err := store.NormalizeMailboxName(name)
	if err != nil {
		return store.Mailbox{}, err
	}
	m, err := scanMailbox(s.readRow(ctx, "SELECT "+mailboxCols+" FROM mailboxes WHERE account_id = $1 AND name = $2", accountID, n))
	if noRows(err) {
		return store.Mailbox{}, fmt.Errorf("mailbox %q: %w", n, store.ErrNotFound)
	}
	if err != nil {
		return store.Mailbox{}, storeErr(fmt.Errorf("mailbox %q: %w", n, err))
	}
	return m, nil
}

func (s *Store) MailboxStatus(ctx context.Context, accountID int64, name string) (store.MailboxStatus, error) {
	n, err := store.NormalizeMailboxName(name)
	if err != nil {
		return store.MailboxStatus{}, err
	}
	// One statement: the counters and the mailbox from one snapshot.
	var st store.MailboxStatus
	m := &st.Mailbox
	err = s.readRow(ctx, "SELECT "+mailboxCols+`, c.n, c.unseen, c.size, c.recent FROM mailboxes,
		LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE flags & $3 = 0) AS unseen, coalesce(sum(b.size), 0)::bigint AS size,
			count(*) FILTER (WHERE uid >= mailboxes.first_recent_uid) AS recent
			FROM mail JOIN blobs b ON b.id = mail.blob_id WHERE mailbox_id = mailboxes.id) c
		WHERE account_id = $1 AND name = $2`, accountID, n, store.FlagSeen).
		Scan(&m.ID, &m.AccountID, &m.Name, &m.SpecialUse, &m.Subscribed, &m.UIDValidity, &m.UIDNext, &m.HighestModSeq,
			&m.FirstRecentUID, &st.Messages, &st.Unseen, &st.Size, &st.Recent)
	if noRows(err) {
		return store.MailboxStatus{}, fmt.Errorf("mailbox %q: %w", n, store.ErrNotFound)
	}
	if err != nil {
		return store.MailboxStatus{}, storeErr(fmt.Errorf("mailbox status %q: %w", n, err))
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
		if err := lockAccount(w, accountID); err != nil {
			return err
		}
		m, err := createMailbox(w, accountID, n, specialUse)
		out = m
		return err
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
		m, err := scanMailbox(w.queryRow("SELECT "+mailboxCols+" FROM mailboxes WHERE account_id = $1 AND name = $2 FOR UPDATE", accountID, n))
		if noRows(err) {
			return fmt.Errorf("mailbox %q: %w", n, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("look up mailbox %q: %w", n, err)
		}
		if m.SpecialUse != store.SpecialNone {
			return fmt.Errorf("mailbox %q is special-use %s: %w", n, m.SpecialUse, store.ErrMailboxInUse)
		}
		lo, hi := store.ChildNameRange(n)
		var children bool
		if err := w.queryRow("SELECT EXISTS (SELECT 1 FROM mailboxes WHERE account_id = $1 AND name >= $2 AND name < $3)",
			accountID, lo, hi).Scan(&children); err != nil {
			return fmt.Errorf("look up child mailboxes: %w", err)
		}
		if children {
			return fmt.Errorf("mailbox %q has children: %w", n, store.ErrMailboxInUse)
		}
		if err := releaseMailboxMail(w, m); err != nil {
			return err
		}
		if _, err := w.exec("DELETE FROM expunged WHERE mailbox_id = $1", m.ID); err != nil {
			return fmt.Errorf("delete tombstones: %w", err)
		}
		if _, err := w.exec("DELETE FROM mailboxes WHERE id = $1", m.ID); err != nil {
			return fmt.Errorf("delete mailbox: %w", err)
		}
		w.publish(accountID, m.ID)
		w.publish(accountID, 0)
		return nil
	})
	if err == nil {
		s.kickCollector()
	}
	return err
}

// releaseMailboxMail deletes every message row of a mailbox, takes their
// sizes off the account's usage and their references off the blobs
// (which the collector removes once unreferenced).
func releaseMailboxMail(w *wtx, m store.Mailbox) error {
	var size int64
	err := w.queryRow(`WITH gone AS (DELETE FROM mail WHERE mailbox_id = $1 RETURNING blob_id),
		counted AS (SELECT blob_id, count(*) AS n FROM gone GROUP BY blob_id),
		released AS (UPDATE blobs SET refcount = refcount - c.n FROM counted c WHERE blobs.id = c.blob_id
			RETURNING blobs.size * c.n AS bytes)
		SELECT coalesce(sum(bytes), 0)::bigint FROM released`, m.ID).Scan(&size)
	if err != nil {
		return fmt.Errorf("delete messages: %w", err)
	}
	return addUsage(w, m.AccountID, -size)
}

// addUsage changes an account's usage (store.Quotas) by delta bytes.
func addUsage(w *wtx, accountID, delta int64) error {
	if delta == 0 {
		return nil
	}
	if _, err := w.exec("UPDATE accounts SET used_bytes = used_bytes + $1 WHERE id = $2", delta, accountID); err != nil {
		return fmt.Errorf("account usage: %w", err)
	}
	return nil
}

// RenameMailbox renames a mailbox with its children. Renaming INBOX moves
// its messages to a new mailbox and leaves INBOX empty; INBOX's children
// stay (RFC 9051 §6.3.6). Missing superior names of the new name are
// created.
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
		lo, hi := store.ChildNameRange(f)
		rows, _ := w.query(`SELECT id, name FROM mailboxes WHERE account_id = $1 AND (name = $2 OR (name >= $3 AND name < $4))
			ORDER BY name FOR UPDATE`, accountID, f, lo, hi)
		type rename struct {
			id           int64
			old, newName string
		}
		renames, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rename, error) {
			var rn rename
			err := r.Scan(&rn.id, &rn.old)
			rn.newName = t + strings.TrimPrefix(rn.old, f)
			return rn, err
		})
		if err != nil {
			return fmt.Errorf("list mailboxes to rename: %w", err)
		}
		if len(renames) == 0 || renames[0].old != f {
			return fmt.Errorf("mailbox %q: %w", f, store.ErrNotFound)
		}
		moving := map[string]bool{}
		var ids []int64
		var names []string
		for _, rn := range renames {
			moving[rn.old] = true
			ids = append(ids, rn.id)
			names = append(names, rn.newName)
		}
		for _, rn := range renames {
			if moving[rn.newName] {
				continue // freed by this rename
			}
			if _, err := mailboxByName(w, accountID, rn.newName); err == nil {
				return fmt.Errorf("mailbox %q: %w", rn.newName, store.ErrExists)
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		// Two steps, so that names swapping inside the set never
		// collide; the interim names hold a control character, which
		// no mailbox name has.
		if _, err := w.exec("UPDATE mailboxes SET name = E'\\x01rename-' || id WHERE id = ANY($1)", ids); err != nil {
			return fmt.Errorf("rename mailbox: %w", err)
		}
		if _, err := w.exec(`UPDATE mailboxes m SET name = r.name FROM unnest($1::bigint[], $2::text[]) AS r(id, name)
			WHERE m.id = r.id`, ids, names); err != nil {
			return fmt.Errorf("rename mailbox: %w", err)
		}
		if err := renameSubscriptions(w, accountID, f, t); err != nil {
			return err
		}
		if err := createParents(w, accountID, t); err != nil {
			return err
		}
		w.publish(accountID, renames[0].id)
		w.publish(accountID, 0)
		return nil
	})
}

// renameInbox implements RENAME INBOX (RFC 9051 §6.3.6): a new mailbox
// gets all of INBOX's messages (with new UIDs under its own UIDVALIDITY);
// INBOX is left empty, its UIDNEXT unchanged, and its messages are
// expunged with tombstones so that clients with INBOX selected see them go.
func (s *Store) renameInbox(ctx context.Context, accountID int64, to string) error {
	return s.write(ctx, func(w *wtx) error {
		inbox, err := lockMailbox(w, 0, accountID, "INBOX")
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

// SetSubscribed subscribes or unsubscribes a name (store.Subscriptions).
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
		} else if _, err := w.exec("DELETE FROM subscriptions WHERE account_id = $1 AND name = $2", accountID, n); err != nil {
			return fmt.Errorf("unsubscribe %q: %w", n, err)
		}
		w.publish(accountID, 0)
		return nil
	})
}

// subscribe adds a subscription inside a transaction.
func subscribe(w *wtx, accountID int64, name string) error {
	if _, err := w.exec("INSERT INTO subscriptions (account_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING", accountID, name); err != nil {
		return fmt.Errorf("subscribe %q: %w", name, err)
	}
	return nil
}

// renameSubscriptions moves the subscriptions of a renamed mailbox and its
// children to their new names, inside the rename's transaction.
func renameSubscriptions(w *wtx, accountID int64, from, to string) error {
	lo, hi := store.ChildNameRange(from)
	rows, _ := w.query(`DELETE FROM subscriptions WHERE account_id = $1 AND (name = $2 OR (name >= $3 AND name < $4))
		RETURNING name`, accountID, from, lo, hi)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("rename subscriptions: %w", err)
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
	rows, _ := s.pool.Query(ctx, "SELECT name FROM subscriptions WHERE account_id = $1 ORDER BY name", accountID)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, storeErr(fmt.Errorf("subscriptions: %w", err))
	}
	return out, nil
}

// ClaimRecent claims the unclaimed messages up to upTo (store.Recent):
// it reads the mailbox's first unclaimed UID under its row's lock and
// moves it on, so that sessions on any node never claim
// the same message. It commits without waiting for the WAL flush: a lost
// claim only makes messages recent once more.
func (s *Store) ClaimRecent(ctx context.Context, mailboxID int64, upTo uint32) (uint32, error) {
	var first uint32
	err := s.writeRelaxed(ctx, func(w *wtx) error {
		err := w.queryRow("SELECT first_recent_uid FROM mailboxes WHERE id = $1 FOR UPDATE", mailboxID).Scan(&first)
		if noRows(err) {
			return fmt.Errorf("mailbox %d: %w", mailboxID, store.ErrNotFound)
		}
		if err != nil || first > upTo {
			return err
		}
		_, err = w.exec("UPDATE mailboxes SET first_recent_uid = $2 WHERE id = $1", mailboxID, int64(upTo)+1)
		return err
	})
	return first, err
}
