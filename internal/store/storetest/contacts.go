package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"pimail/internal/store"
)

// Tests of Contacts and Identities.

func card(uid, name string) []byte {
	return []byte("BEGIN:VCARD\r\nVERSION:4.0\r\nUID:" + uid + "\r\nFN:" + name + "\r\nEND:VCARD\r\n")
}

func testContacts(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	a, b := f.accounts[0].ID, f.accounts[1].ID
	if l, err := s.Contacts(c, a); err != nil || len(l) != 0 {
		t.Fatalf("empty book: %v, %v", l, err)
	}
	zed := store.Contact{Href: "z.vcf", UID: "uid-z", Card: card("uid-z", "Zed"), Name: "Zed",
		Emails: []string{"zed@example.net", "Z@Example.org"}, Groups: []string{"Friends", "Work"}}
	got, err := s.PutContact(c, a, zed, 0)
	if err != nil || got.Version <= 0 || got.Modified.IsZero() {
		t.Fatalf("create: %+v, %v", got, err)
	}
	ann, err := s.PutContact(c, a, store.Contact{Href: "a.vcf", UID: "uid-a", Card: card("uid-a", "Ann"), Name: "Ann"}, store.AnyVersion)
	if err != nil || ann.Version <= got.Version {
		t.Fatalf("create (any version): %+v, %v; versions grow across the book", ann, err)
	}
	l, err := s.Contacts(c, a)
	if err != nil || len(l) != 2 || l[0].Name != "Ann" || l[1].Name != "Zed" {
		t.Fatalf("list by name: %+v, %v", l, err)
	}
	z := l[1]
	if string(z.Card) != string(zed.Card) || !slices.Equal(z.Emails, zed.Emails) || !slices.Equal(z.Groups, zed.Groups) ||
		z.UID != "uid-z" || z.Version != got.Version || !z.Modified.Equal(got.Modified) {
		t.Fatalf("stored card differs: %+v", z)
	}
	if one, err := s.Contact(c, a, "z.vcf"); err != nil || one.Name != "Zed" || one.Version != got.Version {
		t.Fatalf("Contact: %+v, %v", one, err)
	}
	if _, err := s.Contact(c, b, "z.vcf"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another account's card: %v, want ErrNotFound", err)
	}
	// Compare-and-swap on the version.
	if _, err := s.PutContact(c, a, zed, 0); !errors.Is(err, store.ErrModified) {
		t.Fatalf("create over a card: %v, want ErrModified", err)
	}
	zed.Name = "Zed Two"
	up, err := s.PutContact(c, a, zed, got.Version)
	if err != nil || up.Version <= ann.Version {
		t.Fatalf("update: %+v, %v", up, err)
	}
	if _, err := s.PutContact(c, a, zed, got.Version); !errors.Is(err, store.ErrModified) {
		t.Fatalf("update with a stale version: %v, want ErrModified", err)
	}
	if _, err := s.PutContact(c, a, store.Contact{Href: "gone.vcf", UID: "g", Name: "g"}, 5); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of no card: %v, want ErrNotFound", err)
	}
	// The UID is unique per account, not across accounts.
	if _, err := s.PutContact(c, a, store.Contact{Href: "other.vcf", UID: "uid-z", Name: "x"}, 0); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second card with a UID: %v, want ErrExists", err)
	}
	if _, err := s.PutContact(c, b, zed, 0); err != nil {
		t.Fatalf("same card in another account: %v", err)
	}
	for _, bad := range []store.Contact{
		{Href: "", UID: "u", Name: "n"}, {Href: "a/b.vcf", UID: "u", Name: "n"}, {Href: "h.vcf", UID: "", Name: "n"},
		{Href: "h.vcf", UID: "u", Card: make([]byte, store.MaxContactSize+1)}, {Href: "h.vcf", UID: "u", Emails: []string{"a\nb"}},
	} {
		if _, err := s.PutContact(c, a, bad, store.AnyVersion); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("card %q/%q/%d bytes: %v, want ErrInvalid", bad.Href, bad.UID, len(bad.Card), err)
		}
	}
	if _, err := s.PutContact(c, a+b+1000, zed, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown account: %v, want ErrNotFound", err)
	}
	// Delete, and a card made again at the same href never has an old version.
	if err := s.DeleteContact(c, a, "z.vcf", got.Version); !errors.Is(err, store.ErrModified) {
		t.Fatalf("delete with a stale version: %v", err)
	}
	if err := s.DeleteContact(c, a, "z.vcf", up.Version); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := s.DeleteContact(c, a, "z.vcf", store.AnyVersion); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete again: %v, want ErrNotFound", err)
	}
	again, err := s.PutContact(c, a, zed, 0)
	if err != nil || again.Version <= up.Version {
		t.Fatalf("made again: %+v, %v (the old version was %d)", again, err, up.Version)
	}
	// Concurrent edits of one card: exactly one of them wins each round.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := zed
			e.Name = fmt.Sprint("writer ", i)
			if _, err := s.PutContact(c, a, e, again.Version); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, store.ErrModified) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d concurrent writers with one version won, want 1", wins)
	}
	// Cards go with their account.
	if err := s.RemoveAccount(c, f.accounts[1].Address); err != nil {
		t.Fatal(err)
	}
	if l, err := s.Contacts(c, b); err != nil || len(l) != 0 {
		t.Fatalf("cards of a removed account: %v, %v", l, err)
	}
}

func testIdentities(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	a, b := f.accounts[0].ID, f.accounts[1].ID
	if l, err := s.Identities(c, a); err != nil || len(l) != 0 {
		t.Fatalf("none: %v, %v", l, err)
	}
	first, err := s.PutIdentity(c, a, store.Identity{Address: "user0@example.org", Name: "User Zero", Signature: "-- \nZero"})
	if err != nil || first.ID == 0 {
		t.Fatalf("create: %+v, %v", first, err)
	}
	second, err := s.PutIdentity(c, a, store.Identity{Address: "Sales@example.org", Name: "Sales"})
	if err != nil || second.ID == first.ID {
		t.Fatalf("create second: %+v, %v", second, err)
	}
	if _, err := s.PutIdentity(c, a, store.Identity{Address: "sales@EXAMPLE.org"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("address taken (other case): %v, want ErrExists", err)
	}
	if _, err := s.PutIdentity(c, b, store.Identity{Address: "sales@example.org"}); err != nil {
		t.Fatalf("same address in another account: %v", err)
	}
	second.Signature = "Best,\nSales"
	if _, err := s.PutIdentity(c, a, second); err != nil {
		t.Fatalf("update: %v", err)
	}
	stolen := second
	stolen.Address = "stolen@example.org"
	if _, err := s.PutIdentity(c, b, stolen); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of another account's identity: %v, want ErrNotFound", err)
	}
	for _, bad := range []store.Identity{{Address: ""}, {Address: "x@y", Signature: string(make([]byte, store.MaxIdentityField+1))}} {
		if _, err := s.PutIdentity(c, a, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("identity %q: %v, want ErrInvalid", bad.Address, err)
		}
	}
	if _, err := s.PutIdentity(c, a+b+1000, store.Identity{Address: "q@example.org"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown account: %v, want ErrNotFound", err)
	}
	l, err := s.Identities(c, a)
	if err != nil || len(l) != 2 || l[0] != first || l[1] != second {
		t.Fatalf("list: %+v, %v", l, err)
	}
	if err := s.DeleteIdentity(c, b, first.ID); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.Identities(c, a); len(l) != 2 {
		t.Fatal("another account deleted an identity")
	}
	if err := s.DeleteIdentity(c, a, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteIdentity(c, a, first.ID); err != nil {
		t.Fatalf("delete again: %v", err)
	}
	if l, _ := s.Identities(c, a); len(l) != 1 || l[0] != second {
		t.Fatalf("after delete: %+v", l)
	}
	if err := s.RemoveAccount(c, f.accounts[0].Address); err != nil {
		t.Fatal(err)
	}
	if l, err := s.Identities(c, a); err != nil || len(l) != 0 {
		t.Fatalf("identities of a removed account: %v, %v", l, err)
	}
}
