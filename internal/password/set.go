package password

import (
	"context"
	"fmt"

	"pimail/internal/store"
)

// Set gives an account the password pw: the argon2id hash that plain
// logins verify and the SCRAM-SHA-256 keys (RFC 7677) that SCRAM logins
// verify. Every password change goes through it, so that the two never
// disagree (a hash changed alone leaves SCRAM without keys).
func Set(ctx context.Context, st store.Credentials, address, pw string) error {
	hash, err := Hash(pw)
	if err != nil {
		return err
	}
	if err := st.SetPassword(ctx, address, hash); err != nil {
		return fmt.Errorf("set password of %s: %w", address, err)
	}
	return setSCRAM(ctx, st, address, pw)
}

// AccountWriter is what AddAccount needs of the store.
type AccountWriter interface {
	store.DirectoryWriter
	store.Credentials
}

// AddAccount creates an account whose password is pw, with the
// credentials of Set. Errors wrap the store's (ErrNotFound for a domain
// that does not exist, ErrExists for a taken address).
func AddAccount(ctx context.Context, st AccountWriter, address, pw string) (store.Account, error) {
	hash, err := Hash(pw)
	if err != nil {
		return store.Account{}, err
	}
	a, err := st.AddAccount(ctx, address, hash)
	if err != nil {
		return store.Account{}, fmt.Errorf("add account %s: %w", address, err)
	}
	return a, setSCRAM(ctx, st, address, pw)
}

func setSCRAM(ctx context.Context, st store.Credentials, address, pw string) error {
	keys, err := SCRAMKeys(pw)
	if err != nil {
		return err
	}
	if err := st.SetSCRAM(ctx, address, keys); err != nil {
		return fmt.Errorf("store SCRAM keys of %s: %w", address, err)
	}
	return nil
}
