package store

import "context"

// Identity is an address an account sends as, with the display name and
// the signature its messages carry. Which addresses an account may use
// (its own, the aliases that deliver to it) is the sender's rule, not the
// store's: the store keeps what it is given.
type Identity struct {
	ID        int64  // set by the store
	Address   string // unique per account, compared case-insensitively
	Name      string
	Signature string // plain text
}

// Identities keeps each account's identities. They are removed with their
// account.
type Identities interface {
	// Identities lists the account's identities in the order they were
	// created.
	Identities(ctx context.Context, accountID int64) ([]Identity, error)
	// PutIdentity creates id (ID 0; the new ID is returned) or replaces
	// the account's identity with id.ID. ErrExists when another identity
	// of the account has the address, ErrNotFound for an unknown account
	// or ID, ErrInvalid for an empty address or fields over
	// MaxIdentityField.
	PutIdentity(ctx context.Context, accountID int64, id Identity) (Identity, error)
	// DeleteIdentity removes one; one that is gone is no error.
	DeleteIdentity(ctx context.Context, accountID, id int64) error
}

// MaxIdentityField bounds an identity's address, name and signature.
const MaxIdentityField = 8 << 10
