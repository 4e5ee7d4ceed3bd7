package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// Preferences, sessions, spam models, secrets and MTA-STS policies, as
// store's doc ("Implementing the state roles") describes them in plain
// SQL: compare-and-swap by version, first writer wins by ON CONFLICT DO
// NOTHING.

// Preferences returns an account's document of app (store.Preferences).
func (s *Store) Preferences(ctx context.Context, accountID int64, app string) ([]byte, int64, error) {
	var doc []byte
	var version int64
	err := s.readRow(ctx, "SELECT doc, version FROM prefs WHERE account_id = $1 AND app = $2", accountID, app).Scan(&doc, &version)
	if noRows(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, storeErr(fmt.Errorf("preferences %q of account %d: %w", app, accountID, err))
	}
	return doc, version, nil
}

// SetPreferences replaces the document if its version is still ifVersion.
func (s *Store) SetPreferences(ctx context.Context, accountID int64, app string, doc []byte, ifVersion int64) (int64, error) {
	if app == "" || len(doc) > store.MaxPreferencesSize || ifVersion < 0 {
		return 0, fmt.Errorf("preferences %q of account %d: %w", app, accountID, store.ErrInvalid)
	}
	var version int64
	err := s.write(ctx, func(w *wtx) error {
		if err := accountExists(w, accountID); err != nil {
			return err
		}
		var err error
		version, err = casWrite(w, ifVersion,
			"INSERT INTO prefs (account_id, app, doc, version) VALUES ($1, $2, $3, 1) ON CONFLICT DO NOTHING",
			"UPDATE prefs SET doc = $3, version = version + 1 WHERE account_id = $1 AND app = $2 AND version = $4",
			accountID, app, nonNil(doc))
		if err != nil {
			return fmt.Errorf("preferences %q of account %d: %w", app, accountID, err)
		}
		return nil
	})
	return version, err
}

// casWrite is the compare-and-swap of a versioned row: insert it when
// ifVersion is 0 (ON CONFLICT DO NOTHING: a row that is there, or that
// another writer inserts at the same time, is a lost race), else update
// it where its version is still ifVersion. insert takes args, update
// args and ifVersion. It returns the new version; ErrModified when the
// race is lost.
func casWrite(w *wtx, ifVersion int64, insert, update string, args ...any) (int64, error) {
	q := insert
	if ifVersion != 0 {
		q, args = update, append(args, ifVersion)
	}
	tag, err := w.exec(q, args...)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() == 0 {
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
	err := s.readRow(ctx, "SELECT value FROM secrets WHERE name = $1", name).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !noRows(err) {
		return nil, storeErr(fmt.Errorf("secret %q: %w", name, err))
	}
	err = s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", name, fresh); err != nil {
			return fmt.Errorf("store secret %q: %w", name, err)
		}
		// Whoever inserted first, this is the secret now.
		if err := w.queryRow("SELECT value FROM secrets WHERE name = $1", name).Scan(&v); err != nil {
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
			_, err = w.exec("DELETE FROM mta_sts WHERE domain_id = $1", id)
		} else {
			_, err = w.exec(`INSERT INTO mta_sts (domain_id, policy) VALUES ($1, $2)
				ON CONFLICT (domain_id) DO UPDATE SET policy = excluded.policy`, id, policy)
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
	err = s.readRow(ctx, "SELECT p.policy FROM mta_sts p JOIN domains d ON d.id = p.domain_id WHERE d.name = $1", d).Scan(&p)
	if noRows(err) {
		return "", fmt.Errorf("MTA-STS policy of %q: %w", d, store.ErrNotFound)
	}
	if err != nil {
		return "", storeErr(fmt.Errorf("MTA-STS policy of %q: %w", d, err))
	}
	return p, nil
}

// CreateSession stores a session after pruning expired ones and the
// account's least recently seen beyond maxPerAccount.
func (s *Store) CreateSession(ctx context.Context, ss store.Session, maxPerAccount int) error {
	if ss.App == "" || ss.ID == "" {
		return fmt.Errorf("session: %w", store.ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		if err := accountExists(w, ss.AccountID); err != nil {
			return fmt.Errorf("session: %w", err)
		}
		if _, err := w.exec("DELETE FROM sessions WHERE expires <= $1", ss.Created.UnixMilli()); err != nil {
			return fmt.Errorf("prune sessions: %w", err)
		}
		if maxPerAccount > 0 {
			// Keep maxPerAccount-1 of them, most recently seen first.
			if _, err := w.exec(`DELETE FROM sessions WHERE app = $1 AND account_id = $2 AND id IN
				(SELECT id FROM sessions WHERE app = $1 AND account_id = $2
				 ORDER BY last_seen DESC OFFSET $3)`, ss.App, ss.AccountID, maxPerAccount-1); err != nil {
				return fmt.Errorf("bound sessions: %w", err)
			}
		}
		tag, err := w.exec(`INSERT INTO sessions (app, id, account_id, csrf, created, last_seen, expires, client)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`, ss.App, ss.ID, ss.AccountID, ss.CSRF,
			ss.Created.UnixMilli(), ss.LastSeen.UnixMilli(), ss.Expires.UnixMilli(), []byte(store.CutSessionClient(ss.Client)))
		if err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("session: %w", store.ErrExists)
		}
		return nil
	})
}

// Session returns a live session with the account's address.
func (s *Store) Session(ctx context.Context, app, id string, now time.Time) (store.Session, error) {
	ss := store.Session{App: app, ID: id}
	var created, lastSeen, expires int64
	var client []byte
	err := s.readRow(ctx, `SELECT s.account_id, a.address, s.csrf, s.created, s.last_seen, s.expires, s.client
		FROM sessions s JOIN accounts a ON a.id = s.account_id
		WHERE s.app = $1 AND s.id = $2 AND s.expires > $3`, app, id, now.UnixMilli()).
		Scan(&ss.AccountID, &ss.Address, &ss.CSRF, &created, &lastSeen, &expires, &client)
	if noRows(err) {
		return store.Session{}, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, storeErr(fmt.Errorf("session: %w", err))
	}
	ss.Created, ss.LastSeen, ss.Expires = time.UnixMilli(created), time.UnixMilli(lastSeen), time.UnixMilli(expires)
	ss.Client = string(client)
	return ss, nil
}

// TouchSession moves a session's last use and expiry forward; relaxed.
func (s *Store) TouchSession(ctx context.Context, app, id string, lastSeen, expires time.Time) error {
	return s.writeRelaxed(ctx, func(w *wtx) error {
		if _, err := w.exec(`UPDATE sessions SET last_seen = greatest(last_seen, $3), expires = greatest(expires, $4)
			WHERE app = $1 AND id = $2`, app, id, lastSeen.UnixMilli(), expires.UnixMilli()); err != nil {
			return fmt.Errorf("touch session: %w", err)
		}
		return nil
	})
}

// DeleteSession removes a session.
func (s *Store) DeleteSession(ctx context.Context, app, id string) error {
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM sessions WHERE app = $1 AND id = $2", app, id); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return nil
	})
}

// DeleteAccountSessions removes an account's sessions of app but keep.
func (s *Store) DeleteAccountSessions(ctx context.Context, app string, accountID int64, keep string) error {
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec("DELETE FROM sessions WHERE app = $1 AND account_id = $2 AND id <> $3", app, accountID, keep); err != nil {
			return fmt.Errorf("delete sessions of account %d: %w", accountID, err)
		}
		return nil
	})
}

// AccountSessions lists an account's live sessions of app, most recently
// seen first.
func (s *Store) AccountSessions(ctx context.Context, app string, accountID int64, now time.Time) ([]store.Session, error) {
	rows, _ := s.pool.Query(ctx, `SELECT s.id, a.address, s.csrf, s.created, s.last_seen, s.expires, s.client
		FROM sessions s JOIN accounts a ON a.id = s.account_id
		WHERE s.app = $1 AND s.account_id = $2 AND s.expires > $3 ORDER BY s.last_seen DESC, s.id`, app, accountID, now.UnixMilli())
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Session, error) {
		ss := store.Session{App: app, AccountID: accountID}
		var created, lastSeen, expires int64
		var client []byte
		err := r.Scan(&ss.ID, &ss.Address, &ss.CSRF, &created, &lastSeen, &expires, &client)
		ss.Created, ss.LastSeen, ss.Expires = time.UnixMilli(created), time.UnixMilli(lastSeen), time.UnixMilli(expires)
		ss.Client = string(client)
		return ss, err
	})
	if err != nil {
		return nil, storeErr(fmt.Errorf("sessions of account %d: %w", accountID, err))
	}
	return out, nil
}

// SpamModel returns a stored model and its version.
func (s *Store) SpamModel(ctx context.Context, accountID int64) ([]byte, int64, error) {
	var data []byte
	var version int64
	err := s.readRow(ctx, "SELECT data, version FROM spam_models WHERE account_id = $1", accountID).Scan(&data, &version)
	if noRows(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, storeErr(fmt.Errorf("spam model of account %d: %w", accountID, err))
	}
	return data, version, nil
}

// SpamModelVersion returns a stored model's version (0: none).
func (s *Store) SpamModelVersion(ctx context.Context, accountID int64) (int64, error) {
	var version int64
	err := s.readRow(ctx, "SELECT version FROM spam_models WHERE account_id = $1", accountID).Scan(&version)
	if noRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, storeErr(fmt.Errorf("spam model version of account %d: %w", accountID, err))
	}
	return version, nil
}

// SaveSpamModel replaces a model by compare-and-swap and records ledger
// entries (for blobs that still exist) in the same transaction.
func (s *Store) SaveSpamModel(ctx context.Context, accountID int64, data []byte, ifVersion int64, trained []store.JunkTrained) (int64, error) {
	if accountID < 0 || ifVersion < 0 || (accountID == 0 && len(trained) > 0) {
		return 0, fmt.Errorf("spam model of account %d: %w", accountID, store.ErrInvalid)
	}
	blobs := make([]int64, len(trained))
	spam := make([]bool, len(trained))
	for i, t := range trained {
		blobs[i], spam[i] = t.BlobID, t.Spam
	}
	var version int64
	err := s.write(ctx, func(w *wtx) error {
		if accountID != 0 {
			// The model has no foreign key (account 0 is none).
			if err := accountExists(w, accountID); err != nil {
				return fmt.Errorf("spam model: %w", err)
			}
		}
		var err error
		version, err = casWrite(w, ifVersion,
			"INSERT INTO spam_models (account_id, data, version) VALUES ($1, $2, 1) ON CONFLICT DO NOTHING",
			"UPDATE spam_models SET data = $2, version = version + 1 WHERE account_id = $1 AND version = $3",
			accountID, nonNil(data))
		if err != nil {
			return fmt.Errorf("spam model of account %d: %w", accountID, err)
		}
		if len(trained) == 0 {
			return nil
		}
		// Later entries for a blob win, as one after the other would.
		if _, err := w.exec(`INSERT INTO junk_ledger (blob_id, account_id, spam)
			SELECT DISTINCT ON (t.b) t.b, $1, t.s FROM unnest($2::bigint[], $3::boolean[]) WITH ORDINALITY AS t(b, s, o)
			WHERE EXISTS (SELECT 1 FROM blobs WHERE id = t.b) ORDER BY t.b, t.o DESC
			ON CONFLICT (blob_id, account_id) DO UPDATE SET spam = excluded.spam`, accountID, blobs, spam); err != nil {
			return fmt.Errorf("junk ledger of account %d: %w", accountID, err)
		}
		return nil
	})
	return version, err
}

// JunkTrained reports how an account's copy of a blob was trained.
func (s *Store) JunkTrained(ctx context.Context, accountID, blobID int64) (spam, ok bool, err error) {
	err = s.readRow(ctx, "SELECT spam FROM junk_ledger WHERE blob_id = $1 AND account_id = $2", blobID, accountID).Scan(&spam)
	if noRows(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, storeErr(fmt.Errorf("junk ledger of account %d: %w", accountID, err))
	}
	return spam, true, nil
}
