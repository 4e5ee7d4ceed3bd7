package store

import (
	"context"
	"time"
)

// Contact is one card of an account's address book: a vCard (RFC 6350),
// kept as the program that wrote it gave it, with the fields the address
// book is listed and searched by, which that program takes from the card.
// The store never reads the card itself.
type Contact struct {
	// Href names the card in the address book (for CardDAV, RFC 6352,
	// the last segment of its URL, which the client chooses); unique per
	// account, 1–255 bytes, no '/'.
	Href string
	// UID is the card's UID property (RFC 6350 §6.7.6); unique per
	// account (RFC 6352 §6.3.2.1, no-uid-conflict), 1–255 bytes.
	UID      string
	Card     []byte   // the vCard, as text; at most MaxContactSize
	Name     string   // the formatted name (FN)
	Emails   []string // the e-mail addresses, in the card's order
	Groups   []string // the groups it belongs to (CATEGORIES)
	Version  int64    // set by the store: > 0, and greater after every change (the ETag)
	Modified time.Time
}

// MaxContactSize bounds one card.
const MaxContactSize = 256 << 10

// AnyVersion as ifVersion makes PutContact and DeleteContact
// unconditional.
const AnyVersion = -1

// Contacts keeps each account's address book, which the webmail shows
// and CardDAV clients (phones, Thunderbird) sync. Cards are removed with
// their account. Writes are compare-and-swap on the card's version, so
// that a phone and the webmail editing one card never lose a change
// unnoticed.
type Contacts interface {
	// Contacts lists the account's cards by Name, then Href.
	Contacts(ctx context.Context, accountID int64) ([]Contact, error)
	// Contact returns the card at href (ErrNotFound).
	Contact(ctx context.Context, accountID int64, href string) (Contact, error)
	// PutContact stores c at c.Href and returns it as stored (Version
	// and Modified set). With ifVersion 0 it only creates: ErrModified
	// when a card is at c.Href. With ifVersion > 0 it only replaces the
	// card whose Version is ifVersion: ErrModified when the version
	// differs, ErrNotFound when there is no card. AnyVersion creates or
	// replaces. ErrExists when another card of the account has c.UID;
	// ErrInvalid for an Href, UID or card out of bounds; ErrNotFound for
	// an unknown account.
	PutContact(ctx context.Context, accountID int64, c Contact, ifVersion int64) (Contact, error)
	// DeleteContact removes the card at href when its Version is
	// ifVersion (AnyVersion: whatever it is): ErrNotFound when there is
	// none, ErrModified when the version differs.
	DeleteContact(ctx context.Context, accountID int64, href string, ifVersion int64) error
}
