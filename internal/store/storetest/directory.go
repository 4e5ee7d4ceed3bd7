package storetest

import (
	"slices"
	"testing"

	"pimail/internal/store"
)

func testDomains(t *testing.T, s store.Store) {
	c := ctx(t)
	d, err := s.AddDomain(c, "Example.ORG")
	if err != nil {
		t.Fatalf("AddDomain: %v", err)
	}
	if d.Name != "example.org" || d.ID == 0 {
		t.Fatalf("AddDomain = %+v, want lower-case name and an ID", d)
	}
	_, err = s.AddDomain(c, "example.org")
	wantErr(t, "AddDomain twice", err, store.ErrExists)
	if _, err := s.AddDomain(c, "example.net"); err != nil {
		t.Fatalf("AddDomain: %v", err)
	}
	ds, err := s.Domains(c)
	if err != nil {
		t.Fatalf("Domains: %v", err)
	}
	if len(ds) != 2 {
		t.Fatalf("Domains = %+v, want 2", ds)
	}
	if _, err := s.AddAccount(c, "a@example.net", "h"); err != nil {
		t.Fatalf("AddAccount: %v", err)
	}
	wantErr(t, "RemoveDomain with an account", s.RemoveDomain(c, "example.net"), store.ErrInvalid)
	if err := s.RemoveAccount(c, "a@example.net"); err != nil {
		t.Fatalf("RemoveAccount: %v", err)
	}
	if err := s.RemoveDomain(c, "EXAMPLE.net"); err != nil {
		t.Fatalf("RemoveDomain: %v", err)
	}
	wantErr(t, "RemoveDomain twice", s.RemoveDomain(c, "example.net"), store.ErrNotFound)
	ds, _ = s.Domains(c)
	if len(ds) != 1 || ds[0].Name != "example.org" {
		t.Fatalf("Domains after remove = %+v", ds)
	}
}

func testAccounts(t *testing.T, s store.Store) {
	c := ctx(t)
	_, err := s.AddAccount(c, "bob@example.org", "h")
	wantErr(t, "AddAccount without domain", err, store.ErrNotFound)
	if _, err := s.AddDomain(c, "example.org"); err != nil {
		t.Fatal(err)
	}
	a, err := s.AddAccount(c, "Bob@Example.org", "hash1")
	if err != nil {
		t.Fatalf("AddAccount: %v", err)
	}
	if a.Address != "bob@example.org" || a.ID == 0 || a.DomainID == 0 || a.PasswordHash != "hash1" {
		t.Fatalf("AddAccount = %+v", a)
	}
	_, err = s.AddAccount(c, "BOB@example.org", "h")
	wantErr(t, "AddAccount twice", err, store.ErrExists)
	_, err = s.AddAccount(c, "no-at-sign", "h")
	wantErr(t, "AddAccount bad address", err, store.ErrInvalid)

	got, err := s.Account(c, "BOB@EXAMPLE.ORG")
	if err != nil || got.ID != a.ID {
		t.Fatalf("Account = %+v, %v; want ID %d", got, err, a.ID)
	}
	if got.Created.IsZero() {
		t.Errorf("Account.Created is zero")
	}
	got, err = s.AccountByID(c, a.ID)
	if err != nil || got.Address != a.Address {
		t.Fatalf("AccountByID = %+v, %v", got, err)
	}
	if err := s.SetPassword(c, "bob@example.org", "hash2"); err != nil {
		t.Fatalf("SetPassword: %v", err)
	}
	got, _ = s.Account(c, "bob@example.org")
	if got.PasswordHash != "hash2" {
		t.Fatalf("PasswordHash = %q after SetPassword", got.PasswordHash)
	}
	wantErr(t, "SetPassword unknown", s.SetPassword(c, "nobody@example.org", "x"), store.ErrNotFound)
	_, err = s.Account(c, "nobody@example.org")
	wantErr(t, "Account unknown", err, store.ErrNotFound)
	_, err = s.AccountByID(c, a.ID+1000)
	wantErr(t, "AccountByID unknown", err, store.ErrNotFound)

	if _, err := s.AddAccount(c, "alice@example.org", "h"); err != nil {
		t.Fatal(err)
	}
	as, err := s.Accounts(c)
	if err != nil || len(as) != 2 {
		t.Fatalf("Accounts = %+v, %v; want 2", as, err)
	}
	if err := s.RemoveAccount(c, "Bob@example.org"); err != nil {
		t.Fatalf("RemoveAccount: %v", err)
	}
	_, err = s.Account(c, "bob@example.org")
	wantErr(t, "Account after remove", err, store.ErrNotFound)
	wantErr(t, "RemoveAccount twice", s.RemoveAccount(c, "bob@example.org"), store.ErrNotFound)
	if mbs, err := s.Mailboxes(c, a.ID); err != nil || len(mbs) != 0 {
		t.Fatalf("Mailboxes of removed account = %v, %v; want none", mbs, err)
	}
}

func testAliases(t *testing.T, s store.Store) {
	c := ctx(t)
	err := s.AddAlias(c, "info@example.org", []string{"bob@example.org"})
	wantErr(t, "AddAlias without domain", err, store.ErrNotFound)
	setup(t, s, 1)
	if err := s.AddAlias(c, "Info@example.org", []string{"user0@example.org"}); err != nil {
		t.Fatalf("AddAlias: %v", err)
	}
	// Adding more targets extends the alias; a repeated target is not doubled.
	if err := s.AddAlias(c, "info@example.org", []string{"someone@remote.example", "user0@example.org"}); err != nil {
		t.Fatalf("AddAlias again: %v", err)
	}
	// Catch-all of the domain.
	if err := s.AddAlias(c, "@example.org", []string{"user0@example.org"}); err != nil {
		t.Fatalf("AddAlias catch-all: %v", err)
	}
	err = s.AddAlias(c, "user0@example.org", []string{"x@example.org"})
	wantErr(t, "AddAlias over an account", err, store.ErrExists)
	err = s.AddAlias(c, "x@example.org", nil)
	wantErr(t, "AddAlias without targets", err, store.ErrInvalid)

	al, err := s.Aliases(c)
	if err != nil {
		t.Fatalf("Aliases: %v", err)
	}
	byAddr := map[string][]string{}
	for _, a := range al {
		ts := slices.Clone(a.Targets)
		slices.Sort(ts)
		byAddr[a.Address] = ts
	}
	if got := byAddr["info@example.org"]; !slices.Equal(got, []string{"someone@remote.example", "user0@example.org"}) {
		t.Fatalf("alias info targets = %v", got)
	}
	if got := byAddr["@example.org"]; !slices.Equal(got, []string{"user0@example.org"}) {
		t.Fatalf("catch-all targets = %v", got)
	}
	if len(byAddr) != 2 {
		t.Fatalf("Aliases = %+v, want 2 addresses", al)
	}
	wantErr(t, "RemoveDomain with aliases", s.RemoveDomain(c, "example.org"), store.ErrInvalid)
	if err := s.RemoveAlias(c, "INFO@example.org"); err != nil {
		t.Fatalf("RemoveAlias: %v", err)
	}
	wantErr(t, "RemoveAlias twice", s.RemoveAlias(c, "info@example.org"), store.ErrNotFound)
	al, _ = s.Aliases(c)
	if len(al) != 1 || al[0].Address != "@example.org" {
		t.Fatalf("Aliases after remove = %+v", al)
	}
}

func testDirectoryVersion(t *testing.T, s store.Store) {
	c := ctx(t)
	last, err := s.DirectoryVersion(c)
	if err != nil {
		t.Fatalf("DirectoryVersion: %v", err)
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		v, err := s.DirectoryVersion(c)
		if err != nil {
			t.Fatalf("DirectoryVersion: %v", err)
		}
		if v <= last {
			t.Fatalf("DirectoryVersion after %s = %d, want > %d", what, v, last)
		}
		last = v
	}
	_, err = s.AddDomain(c, "example.org")
	step("AddDomain", err)
	_, err = s.AddAccount(c, "a@example.org", "h")
	step("AddAccount", err)
	step("AddAlias", s.AddAlias(c, "b@example.org", []string{"a@example.org"}))
	step("SetPassword", s.SetPassword(c, "a@example.org", "h2"))
	step("RemoveAlias", s.RemoveAlias(c, "b@example.org"))

	d, err := s.Directory(c)
	if err != nil {
		t.Fatalf("Directory: %v", err)
	}
	if d.Version != last || len(d.Domains) != 1 || len(d.Accounts) != 1 || len(d.Aliases) != 0 {
		t.Fatalf("Directory = %+v, want version %d, 1 domain, 1 account, 0 aliases", d, last)
	}
	if d.Accounts[0].PasswordHash != "h2" {
		t.Fatalf("Directory account = %+v", d.Accounts[0])
	}
	// Mailbox changes are not directory changes.
	a := d.Accounts[0]
	if _, err := s.CreateMailbox(c, a.ID, "Lists", ""); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.DirectoryVersion(c); v != last {
		t.Fatalf("DirectoryVersion moved on CreateMailbox: %d → %d", last, v)
	}
	step("RemoveAccount", s.RemoveAccount(c, "a@example.org"))
	step("RemoveDomain", s.RemoveDomain(c, "example.org"))
}
