package store

import (
	"context"
	"errors"
	"time"
)

// ErrScriptActive refuses to delete the active Sieve script (RFC 5804
// §2.10: DELETESCRIPT of the active script fails with the ACTIVE code).
var ErrScriptActive = errors.New("script is active")

// SieveScript is one of an account's Sieve scripts (RFC 5228), as
// ManageSieve (RFC 5804) and the webmail manage them. At most one script
// of an account is active: the one delivery runs.
type SieveScript struct {
	Name    string // UTF-8, unique per account (RFC 5804 §1.6)
	Content string
	Active  bool
	Updated time.Time
}

// Sieve keeps the accounts' Sieve scripts and the vacation response
// records. The store checks no script: callers parse them first.
type Sieve interface {
	// SieveScripts lists an account's scripts by name, with content.
	SieveScripts(ctx context.Context, accountID int64) ([]SieveScript, error)
	// SieveScript returns one script (ErrNotFound).
	SieveScript(ctx context.Context, accountID int64, name string) (SieveScript, error)
	// ActiveSieveScript returns the active script; ErrNotFound when
	// there is none.
	ActiveSieveScript(ctx context.Context, accountID int64) (SieveScript, error)
	// PutSieveScript creates the script or replaces its content,
	// keeping whether it is active.
	PutSieveScript(ctx context.Context, accountID int64, name, content string) error
	// SetActiveSieveScript makes name the active script and every other
	// one inactive; "" deactivates all (RFC 5804 §2.8). ErrNotFound
	// when the script does not exist.
	SetActiveSieveScript(ctx context.Context, accountID int64, name string) error
	// RenameSieveScript renames a script (ErrNotFound, ErrExists).
	RenameSieveScript(ctx context.Context, accountID int64, from, to string) error
	// DeleteSieveScript removes an inactive script (ErrNotFound,
	// ErrScriptActive).
	DeleteSieveScript(ctx context.Context, accountID int64, name string) error
	// ResetSieve removes all of an account's scripts, the active one
	// too, and its vacation records: delivery is back to the default.
	ResetSieve(ctx context.Context, accountID int64) error
	// ClaimVacationReply records that sender gets a reply for handle at
	// now, unless one was recorded less than period before (RFC 5230
	// §4.1, §4.2); it reports whether the reply may go. The check and
	// the record are one atomic step, so two deliveries at once send
	// one reply.
	ClaimVacationReply(ctx context.Context, accountID int64, handle, sender string, now time.Time, period time.Duration) (bool, error)
}
