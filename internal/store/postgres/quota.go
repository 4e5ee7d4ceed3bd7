package postgres

import (
	"context"
	"fmt"
	"time"

	"pimail/internal/store"
)

// Quotas (RFC 9208): accounts.used_bytes is changed by every statement
// that adds or removes mail rows, in their transaction (addUsage), so
// Quota is one primary-key read.

// SetQuota sets accounts.quota_bytes (0: unlimited); a directory change.
func (s *Store) SetQuota(ctx context.Context, address string, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("quota %d: %w", bytes, store.ErrInvalid)
	}
	_, _, addr, err := store.NormalizeAddress(address, false)
	if err != nil {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		tag, err := w.exec("UPDATE accounts SET quota_bytes = $1 WHERE address = $2", bytes, addr)
		if err != nil {
			return fmt.Errorf("set quota of %q: %w", addr, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("account %q: %w", addr, store.ErrNotFound)
		}
		return bumpDirectory(w)
	})
}

// Quota returns the account's limit and usage in bytes.
func (s *Store) Quota(ctx context.Context, accountID int64) (limit, used int64, err error) {
	err = s.readRow(ctx, "SELECT quota_bytes, used_bytes FROM accounts WHERE id = $1", accountID).Scan(&limit, &used)
	if noRows(err) {
		return 0, 0, fmt.Errorf("account %d: %w", accountID, store.ErrNotFound)
	}
	if err != nil {
		return 0, 0, storeErr(fmt.Errorf("quota of account %d: %w", accountID, err))
	}
	return limit, used, nil
}

// ClaimQuotaNotice records now unless a notice was claimed within
// store.QuotaNoticeInterval; the check and the update are one statement.
func (s *Store) ClaimQuotaNotice(ctx context.Context, accountID int64, now time.Time) (bool, error) {
	var claimed bool
	err := s.write(ctx, func(w *wtx) error {
		tag, err := w.exec("UPDATE accounts SET quota_notice = $1 WHERE id = $2 AND quota_notice <= $3",
			now.Unix(), accountID, now.Add(-store.QuotaNoticeInterval).Unix())
		if err != nil {
			return fmt.Errorf("claim quota notice of account %d: %w", accountID, err)
		}
		claimed = tag.RowsAffected() == 1
		if claimed {
			return nil
		}
		return accountExists(w, accountID)
	})
	return claimed, err
}
