package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

// Tests of Preferences, Sessions, SpamModels, Secrets and MTASTSPolicies.

func testPreferences(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	a, b := f.accounts[0].ID, f.accounts[1].ID
	if doc, v, err := s.Preferences(c, a, "webmail"); err != nil || doc != nil || v != 0 {
		t.Fatalf("none stored: %q, %d, %v", doc, v, err)
	}
	v1, err := s.SetPreferences(c, a, "webmail", []byte(`{"x":1}`), 0)
	if err != nil || v1 <= 0 {
		t.Fatalf("first SetPreferences: %d, %v", v1, err)
	}
	// Compare-and-swap: a writer that read before v1 loses.
	if _, err := s.SetPreferences(c, a, "webmail", []byte(`{"x":2}`), 0); !errors.Is(err, store.ErrModified) {
		t.Fatalf("insert over a stored document: %v, want ErrModified", err)
	}
	v2, err := s.SetPreferences(c, a, "webmail", []byte(`{"x":3}`), v1)
	if err != nil || v2 <= v1 {
		t.Fatalf("update: %d, %v", v2, err)
	}
	if _, err := s.SetPreferences(c, a, "webmail", []byte(`{"x":4}`), v1); !errors.Is(err, store.ErrModified) {
		t.Fatalf("update with a stale version: %v, want ErrModified", err)
	}
	if doc, v, err := s.Preferences(c, a, "webmail"); err != nil || string(doc) != `{"x":3}` || v != v2 {
		t.Fatalf("after the updates: %q, %d, %v", doc, v, err)
	}
	// Per account and per program.
	if doc, _, err := s.Preferences(c, b, "webmail"); err != nil || doc != nil {
		t.Fatalf("another account's: %q, %v", doc, err)
	}
	if doc, _, err := s.Preferences(c, a, "other"); err != nil || doc != nil {
		t.Fatalf("another program's: %q, %v", doc, err)
	}
	if _, err := s.SetPreferences(c, a+b+1000, "webmail", []byte(`{}`), 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown account: %v, want ErrNotFound", err)
	}
	for _, bad := range []struct {
		app string
		doc []byte
	}{{"", []byte("{}")}, {"webmail", make([]byte, store.MaxPreferencesSize+1)}} {
		if _, err := s.SetPreferences(c, b, bad.app, bad.doc, 0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("app %q, %d bytes: %v, want ErrInvalid", bad.app, len(bad.doc), err)
		}
	}
	// Concurrent read-modify-writes: each retries until it wins, none is lost.
	var wg sync.WaitGroup
	const writers = 8
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				doc, v, err := s.Preferences(c, b, "counter")
				if err != nil {
					t.Error(err)
					return
				}
				_, err = s.SetPreferences(c, b, "counter", append(doc, byte('a'+i)), v)
				if !errors.Is(err, store.ErrModified) {
					if err != nil {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	if doc, _, err := s.Preferences(c, b, "counter"); err != nil || len(doc) != writers {
		t.Fatalf("after %d concurrent writers: %q, %v", writers, doc, err)
	}
	// Removed with the account.
	if err := s.RemoveAccount(c, f.accounts[0].Address); err != nil {
		t.Fatal(err)
	}
	if doc, _, err := s.Preferences(c, a, "webmail"); err != nil || doc != nil {
		t.Fatalf("preferences of a removed account: %q, %v", doc, err)
	}
}

func testSessions(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	a, b := f.accounts[0], f.accounts[1]
	now := time.Now().Truncate(time.Second)
	sess := func(app, id string, acct int64, created time.Time) store.Session {
		return store.Session{App: app, ID: id, AccountID: acct, CSRF: "csrf-" + id, Created: created, LastSeen: created, Expires: created.Add(time.Hour)}
	}
	create := func(ss store.Session, max int) {
		t.Helper()
		if err := s.CreateSession(c, ss, max); err != nil {
			t.Fatalf("CreateSession %s: %v", ss.ID, err)
		}
	}
	found := func(app, id string, at time.Time) bool {
		t.Helper()
		_, err := s.Session(c, app, id, at)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	create(sess("webmail", "s1", a.ID, now), 0)
	got, err := s.Session(c, "webmail", "s1", now.Add(time.Minute))
	if err != nil || got.AccountID != a.ID || got.Address != a.Address || got.CSRF != "csrf-s1" ||
		!got.Created.Equal(now) || !got.LastSeen.Equal(now) || !got.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("Session = %+v, %v", got, err)
	}
	if found("admin", "s1", now) || found("webmail", "s2", now) {
		t.Fatal("a session found under another program or ID")
	}
	if err := s.CreateSession(c, sess("webmail", "s1", b.ID, now), 0); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a taken ID: %v, want ErrExists", err)
	}
	if err := s.CreateSession(c, sess("webmail", "x", a.ID+b.ID+1000, now), 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown account: %v, want ErrNotFound", err)
	}
	if err := s.CreateSession(c, sess("", "x", a.ID, now), 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("no program: %v, want ErrInvalid", err)
	}
	// Expiry, and touches that move it forward, never back.
	if found("webmail", "s1", now.Add(time.Hour)) {
		t.Fatal("found at its expiry")
	}
	if err := s.TouchSession(c, "webmail", "s1", now.Add(50*time.Minute), now.Add(110*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchSession(c, "webmail", "s1", now.Add(10*time.Minute), now.Add(70*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Session(c, "webmail", "s1", now.Add(100*time.Minute)); err != nil ||
		!got.LastSeen.Equal(now.Add(50*time.Minute)) || !got.Expires.Equal(now.Add(110*time.Minute)) {
		t.Fatalf("after touches: %+v, %v", got, err)
	}
	if err := s.TouchSession(c, "webmail", "gone", now, now); err != nil {
		t.Fatalf("touch of a session that is gone: %v", err)
	}
	// The bound per account ends the least recently seen.
	create(sess("webmail", "s2", a.ID, now.Add(time.Minute)), 3)
	create(sess("webmail", "s3", a.ID, now.Add(2*time.Minute)), 3)
	create(sess("admin", "s4", a.ID, now.Add(3*time.Minute)), 3) // another program: not counted
	create(sess("webmail", "s5", a.ID, now.Add(4*time.Minute)), 3)
	at := now.Add(5 * time.Minute)
	if found("webmail", "s2", at) || !found("webmail", "s1", at) || !found("webmail", "s3", at) || !found("webmail", "s5", at) || !found("admin", "s4", at) {
		t.Fatal("the bound ended the wrong session (s2 was least recently seen)")
	}
	// Creating a session removes the expired ones of every account.
	create(sess("webmail", "b1", b.ID, now), 0)
	create(sess("webmail", "b2", b.ID, now.Add(2*time.Hour)), 0)
	if found("webmail", "b1", now) || found("webmail", "s3", now) {
		t.Fatal("expired sessions outlived a later login")
	}
	// Deleting.
	create(sess("webmail", "b3", b.ID, now.Add(2*time.Hour)), 0)
	create(sess("admin", "b4", b.ID, now.Add(2*time.Hour)), 0)
	at = now.Add(2*time.Hour + time.Minute)
	if err := s.DeleteAccountSessions(c, "webmail", b.ID, "b3"); err != nil {
		t.Fatal(err)
	}
	if found("webmail", "b2", at) || !found("webmail", "b3", at) || !found("admin", "b4", at) {
		t.Fatal("DeleteAccountSessions ended the wrong sessions")
	}
	if err := s.DeleteSession(c, "webmail", "b3"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(c, "webmail", "b3"); err != nil {
		t.Fatalf("deleting a session that is gone: %v", err)
	}
	if found("webmail", "b3", at) {
		t.Fatal("DeleteSession kept the session")
	}
	// Removed with the account.
	if err := s.RemoveAccount(c, b.Address); err != nil {
		t.Fatal(err)
	}
	if found("admin", "b4", at) {
		t.Fatal("a session of a removed account")
	}
}

func testSpamModels(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	a, b := f.accounts[0].ID, f.accounts[1].ID
	for _, id := range []int64{0, a} {
		if data, v, err := s.SpamModel(c, id); err != nil || data != nil || v != 0 {
			t.Fatalf("model %d before any save: %q, %d, %v", id, data, v, err)
		}
		if v, err := s.SpamModelVersion(c, id); err != nil || v != 0 {
			t.Fatalf("version %d before any save: %d, %v", id, v, err)
		}
	}
	base, err := s.SaveSpamModel(c, 0, []byte("base"), 0, nil)
	if err != nil || base <= 0 {
		t.Fatalf("saving the base model: %d, %v", base, err)
	}
	// The account's copies of two delivered messages are trained.
	f.deliver(t, 1, 0)
	f.deliver(t, 2, 0)
	inbox := f.mailbox(t, 0, "INBOX")
	ms := fetchAll(t, s, inbox.ID)
	b1, b2 := ms[0].BlobID, ms[1].BlobID
	v1, err := s.SaveSpamModel(c, a, []byte("m1"), 0, []store.JunkTrained{{BlobID: b1, Spam: true}, {BlobID: b2, Spam: false}})
	if err != nil {
		t.Fatal(err)
	}
	if spam, ok, err := s.JunkTrained(c, a, b1); err != nil || !ok || !spam {
		t.Fatalf("ledger of b1: %v %v %v", spam, ok, err)
	}
	if spam, ok, err := s.JunkTrained(c, a, b2); err != nil || !ok || spam {
		t.Fatalf("ledger of b2: %v %v %v", spam, ok, err)
	}
	if _, ok, err := s.JunkTrained(c, b, b1); err != nil || ok {
		t.Fatalf("another account's ledger: %v %v", ok, err)
	}
	// Compare-and-swap; a lost save records no ledger entry.
	if _, err := s.SaveSpamModel(c, a, []byte("stale"), 0, []store.JunkTrained{{BlobID: b1, Spam: false}}); !errors.Is(err, store.ErrModified) {
		t.Fatalf("save over a stored model: %v, want ErrModified", err)
	}
	if spam, _, _ := s.JunkTrained(c, a, b1); !spam {
		t.Fatal("a lost save changed the ledger")
	}
	v2, err := s.SaveSpamModel(c, a, []byte("m2"), v1, []store.JunkTrained{{BlobID: b1, Spam: false}})
	if err != nil || v2 <= v1 {
		t.Fatalf("update: %d, %v", v2, err)
	}
	if data, v, err := s.SpamModel(c, a); err != nil || string(data) != "m2" || v != v2 {
		t.Fatalf("after the update: %q, %d, %v", data, v, err)
	}
	if v, err := s.SpamModelVersion(c, a); err != nil || v != v2 {
		t.Fatalf("version after the update: %d, %v", v, err)
	}
	if spam, ok, _ := s.JunkTrained(c, a, b1); !ok || spam {
		t.Fatal("a ledger entry was not replaced by a later decision")
	}
	if _, err := s.SaveSpamModel(c, a+b+1000, []byte("x"), 0, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("model of an unknown account: %v, want ErrNotFound", err)
	}
	// No ledger entry for a message that is not there.
	if _, err := s.SaveSpamModel(c, b, []byte("mb"), 0, []store.JunkTrained{{BlobID: b1 + b2 + 1000, Spam: true}}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.JunkTrained(c, b, b1+b2+1000); ok {
		t.Fatal("a ledger entry for a blob that does not exist")
	}
	// Entries go with their blob: expunge the message of b2.
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 2}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expunge(c, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second) // collection may be deferred
	for {
		if _, ok, err := s.JunkTrained(c, a, b2); err != nil {
			t.Fatal(err)
		} else if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ledger entry of a collected blob is still there")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The account's model and ledger go with the account; the base stays.
	if err := s.RemoveAccount(c, f.accounts[0].Address); err != nil {
		t.Fatal(err)
	}
	if data, v, err := s.SpamModel(c, a); err != nil || data != nil || v != 0 {
		t.Fatalf("model of a removed account: %q, %d, %v", data, v, err)
	}
	if _, ok, _ := s.JunkTrained(c, a, b1); ok {
		t.Fatal("ledger of a removed account")
	}
	if data, v, err := s.SpamModel(c, 0); err != nil || string(data) != "base" || v != base {
		t.Fatalf("base model after removing an account: %q, %d, %v", data, v, err)
	}
}

func testSecrets(t *testing.T, s store.Store) {
	c := ctx(t)
	// Concurrent first calls: one secret wins, everyone gets it.
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Secret(c, "srs", []byte(fmt.Sprintf("fresh-%d", i)))
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	for i := range got {
		if len(got[i]) == 0 || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("callers got different secrets: %q", got)
		}
	}
	if v, err := s.Secret(c, "srs", []byte("later")); err != nil || !bytes.Equal(v, got[0]) {
		t.Fatalf("a later call: %q, %v", v, err)
	}
	if v, err := s.Secret(c, "other", []byte("o")); err != nil || string(v) != "o" {
		t.Fatalf("another secret: %q, %v", v, err)
	}
	for _, bad := range []struct{ name, fresh string }{{"", "x"}, {"x", ""}} {
		if _, err := s.Secret(c, bad.name, []byte(bad.fresh)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Secret(%q, %q): %v, want ErrInvalid", bad.name, bad.fresh, err)
		}
	}
}

func testMTASTSPolicies(t *testing.T, s store.Store) {
	c := ctx(t)
	setup(t, s, 0)
	if _, err := s.AddDomain(c, "example.net"); err != nil {
		t.Fatal(err)
	}
	const p = "version: STSv1\r\nmode: testing\r\nmx: mail.example.org\r\nmax_age: 604800\r\n"
	if _, err := s.MTASTSPolicy(c, "example.org"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no policy: %v, want ErrNotFound", err)
	}
	if err := s.SetMTASTSPolicy(c, "Example.ORG", p); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MTASTSPolicy(c, "example.org"); err != nil || got != p {
		t.Fatalf("policy = %q, %v", got, err)
	}
	if _, err := s.MTASTSPolicy(c, "example.net"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another domain's: %v, want ErrNotFound", err)
	}
	if err := s.SetMTASTSPolicy(c, "example.org", "version: STSv1\r\nmode: enforce\r\n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.MTASTSPolicy(c, "example.org"); got != "version: STSv1\r\nmode: enforce\r\n" {
		t.Fatalf("replaced policy = %q", got)
	}
	if err := s.SetMTASTSPolicy(c, "unknown.example", p); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a domain that is not local: %v, want ErrNotFound", err)
	}
	if err := s.SetMTASTSPolicy(c, "example.org", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MTASTSPolicy(c, "example.org"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removed policy: %v, want ErrNotFound", err)
	}
	// Removed with its domain.
	if err := s.SetMTASTSPolicy(c, "example.net", p); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveDomain(c, "example.net"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddDomain(c, "example.net"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MTASTSPolicy(c, "example.net"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a removed domain's policy came back: %v", err)
	}
}

// writeState writes state of every kind beside the mail before a
// reopen; checkState checks it after.
func writeState(t *testing.T, s store.Store, f fixture) {
	t.Helper()
	c := ctx(t)
	a := f.accounts[0].ID
	now := time.Now()
	if _, err := s.SetPreferences(c, a, "webmail", []byte("prefs"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(c, store.Session{App: "webmail", ID: "k", AccountID: a, CSRF: "c",
		Created: now, LastSeen: now, Expires: now.Add(time.Hour)}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveSpamModel(c, a, []byte("model"), 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Secret(c, "srs", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMTASTSPolicy(c, "example.org", "policy"); err != nil {
		t.Fatal(err)
	}
}

func checkState(t *testing.T, s store.Store, f fixture) {
	t.Helper()
	c := ctx(t)
	a := f.accounts[0].ID
	if doc, _, err := s.Preferences(c, a, "webmail"); err != nil || string(doc) != "prefs" {
		t.Errorf("preferences after reopen: %q, %v", doc, err)
	}
	if ss, err := s.Session(c, "webmail", "k", time.Now()); err != nil || ss.AccountID != a {
		t.Errorf("session after reopen: %+v, %v", ss, err)
	}
	if m, _, err := s.SpamModel(c, a); err != nil || string(m) != "model" {
		t.Errorf("spam model after reopen: %q, %v", m, err)
	}
	if v, err := s.Secret(c, "srs", []byte("new")); err != nil || string(v) != "secret" {
		t.Errorf("secret after reopen: %q, %v", v, err)
	}
	if p, err := s.MTASTSPolicy(c, "example.org"); err != nil || p != "policy" {
		t.Errorf("MTA-STS policy after reopen: %q, %v", p, err)
	}
}
