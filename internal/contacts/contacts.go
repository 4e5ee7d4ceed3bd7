// Package contacts is the address book's card format: vCard 4 (RFC 6350)
// read and written with github.com/emersion/go-vcard, the fields the
// webmail's form edits, and the store's view of a card (store.Contact:
// the card's text plus the name, addresses and groups it is listed and
// searched by). The webmail and the CardDAV server (internal/carddavd)
// both store cards through it, so a card written by a phone and one
// written in the webmail are kept alike.
//
// Groups are the card's CATEGORIES (RFC 6350 §6.7.1), which CardDAV
// clients (Thunderbird, DAVx5, iOS) show as groups.
package contacts

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"slices"
	"strings"
	"unicode"

	"github.com/emersion/go-vcard"

	"pimail/internal/store"
)

// Limits on what a card may hold (beyond store.MaxContactSize).
const (
	MaxEmails = 20
	MaxPhones = 20
	MaxGroups = 20
	maxField  = 255 // bytes of a name, address, phone number or group
	maxNote   = 8 << 10
)

// ErrInvalid is a card that cannot be kept: no UID or name, too large, or
// a field out of bounds. Its text says what, for the user.
var ErrInvalid = errors.New("invalid card")

// Fields are what the webmail's form shows and edits of a card; a card
// keeps whatever else it has (photos, addresses, birthdays) untouched.
type Fields struct {
	Name   string // FN
	Emails []string
	Phones []string
	Org    string
	Note   string
	Groups []string
}

// FieldsOf reads a card's fields.
func FieldsOf(c vcard.Card) Fields {
	return Fields{Name: c.PreferredValue(vcard.FieldFormattedName), Emails: c.Values(vcard.FieldEmail),
		Phones: c.Values(vcard.FieldTelephone), Org: c.Value(vcard.FieldOrganization),
		Note: c.Value(vcard.FieldNote), Groups: c.Categories()}
}

// clean trims a field and turns control characters into spaces (a note
// keeps its line breaks).
func clean(s string, lines bool) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' && lines {
			return r
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, strings.ReplaceAll(s, "\r\n", "\n"))
	return strings.TrimSpace(s)
}

func cleanList(l []string, max int, what string) ([]string, error) {
	var out []string
	for _, v := range l {
		if v = clean(v, false); v != "" && !slices.Contains(out, v) {
			if len(v) > maxField {
				return nil, fmt.Errorf("%w: a %s is too long", ErrInvalid, what)
			}
			out = append(out, v)
		}
	}
	if len(out) > max {
		return nil, fmt.Errorf("%w: at most %d %ss", ErrInvalid, max, what)
	}
	return out, nil
}

// Check cleans the fields and checks them: a name or an address, valid
// addresses, bounded lengths.
func (f *Fields) Check() error {
	var err error
	f.Name, f.Org, f.Note = clean(f.Name, false), clean(f.Org, false), clean(f.Note, true)
	if f.Emails, err = cleanList(f.Emails, MaxEmails, "mail address"); err != nil {
		return err
	}
	if f.Phones, err = cleanList(f.Phones, MaxPhones, "phone number"); err != nil {
		return err
	}
	if f.Groups, err = cleanList(f.Groups, MaxGroups, "group"); err != nil {
		return err
	}
	for _, e := range f.Emails {
		if a, err := mail.ParseAddress(e); err != nil || a.Address != e || a.Name != "" {
			return fmt.Errorf("%w: %q is not a mail address", ErrInvalid, e)
		}
	}
	switch {
	case f.Name == "" && len(f.Emails) == 0:
		return fmt.Errorf("%w: a contact needs a name or a mail address", ErrInvalid)
	case len(f.Name) > maxField || len(f.Org) > maxField || len(f.Note) > maxNote:
		return fmt.Errorf("%w: a field is too long", ErrInvalid)
	}
	if f.Name == "" {
		f.Name = f.Emails[0]
	}
	return nil
}

// Apply writes the fields into c (a new card when c is nil, with a fresh
// UID) and returns it; the card's other properties stay as they were.
func Apply(c vcard.Card, f Fields) vcard.Card {
	if c == nil {
		c = vcard.Card{}
		c.SetValue(vcard.FieldUID, NewUID())
	}
	c.SetValue(vcard.FieldVersion, "4.0")
	c.SetValue(vcard.FieldFormattedName, f.Name)
	if c.Get(vcard.FieldName) == nil {
		// N is required in vCard 3 (RFC 2426 §5); clients that read 3
		// want it. The family name is the formatted name's last word.
		given, family := f.Name, ""
		if i := strings.LastIndexByte(f.Name, ' '); i > 0 && !strings.Contains(f.Name, "@") {
			given, family = f.Name[:i], f.Name[i+1:]
		}
		c.SetName(&vcard.Name{GivenName: given, FamilyName: family})
	}
	set := func(key string, vals []string) {
		delete(c, key)
		for _, v := range vals {
			c.AddValue(key, v)
		}
	}
	set(vcard.FieldEmail, f.Emails)
	set(vcard.FieldTelephone, f.Phones)
	set(vcard.FieldOrganization, nonEmpty(f.Org))
	set(vcard.FieldNote, nonEmpty(f.Note))
	if len(f.Groups) > 0 {
		c.SetCategories(f.Groups)
	} else {
		delete(c, vcard.FieldCategories)
	}
	return c
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// NewUID returns a fresh UID for a card: a random UUID as a URN (RFC
// 6350 §6.7.6).
func NewUID() string { return "urn:uuid:" + newUUID() }

// newUUID returns a random (version 4) UUID, RFC 9562 §5.4.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// HrefFor names a new card in the address book: its UID made safe for a
// URL segment, or a fresh name when the UID is unusable.
func HrefFor(uid string) string {
	uid = strings.TrimPrefix(uid, "urn:uuid:")
	ok := uid != "" && len(uid) <= 200
	for _, r := range uid {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			ok = false
		}
	}
	if !ok {
		uid = newUUID()
	}
	return uid + ".vcf"
}

// ToStore makes the store's contact from a card: its text as vCard 4 and
// the fields it is listed by. The card needs a UID; what a client wrote
// is kept as it wrote it, and only usable values are listed (a malformed
// address is kept in the card but not offered for completion).
func ToStore(c vcard.Card, href string) (store.Contact, error) {
	vcard.ToV4(c)
	uid := c.Value(vcard.FieldUID)
	if uid == "" || len(uid) > 255 || strings.ContainsAny(uid, "\r\n") {
		return store.Contact{}, fmt.Errorf("%w: the card has no usable UID", ErrInvalid)
	}
	f := FieldsOf(c)
	sc := store.Contact{Href: href, UID: uid, Name: clean(f.Name, false)}
	for _, e := range f.Emails {
		if a, err := mail.ParseAddress(clean(e, false)); err == nil && len(a.Address) <= maxField && len(sc.Emails) < MaxEmails {
			sc.Emails = append(sc.Emails, a.Address)
		}
	}
	groups, _ := cleanList(f.Groups, 1000, "group")
	for _, g := range groups {
		if len(g) <= maxField && len(sc.Groups) < MaxGroups {
			sc.Groups = append(sc.Groups, g)
		}
	}
	switch {
	case sc.Name != "":
	case len(sc.Emails) > 0:
		sc.Name = sc.Emails[0]
	default:
		sc.Name = "(no name)"
	}
	var buf bytes.Buffer
	if err := vcard.NewEncoder(&buf).Encode(c); err != nil {
		return store.Contact{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if buf.Len() > store.MaxContactSize {
		return store.Contact{}, fmt.Errorf("%w: the card is larger than %d KB", ErrInvalid, store.MaxContactSize>>10)
	}
	sc.Card = buf.Bytes()
	return sc, nil
}

// Parse reads a stored card.
func Parse(c store.Contact) (vcard.Card, error) {
	card, err := vcard.NewDecoder(bytes.NewReader(c.Card)).Decode()
	if err != nil {
		return nil, fmt.Errorf("card %q: %w", c.Href, err)
	}
	return card, nil
}

// ReadAll reads the cards of a .vcf file (vCard 3 or 4), at most max of
// them; the caller bounds the bytes read.
func ReadAll(r io.Reader, max int) ([]vcard.Card, error) {
	dec := vcard.NewDecoder(r)
	var out []vcard.Card
	for {
		c, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%w: card %d: %v", ErrInvalid, len(out)+1, err)
		}
		if len(out) == max {
			return out, fmt.Errorf("%w: more than %d cards", ErrInvalid, max)
		}
		out = append(out, c)
	}
}

// WriteAll writes stored cards as one .vcf file.
func WriteAll(w io.Writer, cs []store.Contact) error {
	for _, c := range cs {
		if _, err := w.Write(c.Card); err != nil {
			return err
		}
	}
	return nil
}
