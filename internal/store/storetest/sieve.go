package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

// RunSieve runs the tests of store.Sieve, each on a fresh store from open.
func RunSieve(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Scripts", testSieveScripts},
		{"ActiveScript", testSieveActive},
		{"RenameDelete", testSieveRenameDelete},
		{"VacationOncePerPeriod", testVacationClaims},
		{"GoneWithAccount", testSieveAccountRemoved},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

func testSieveScripts(t *testing.T, s store.Store) {
	f := setup(t, s, 2)
	c := ctx(t)
	a, b := f.accounts[0].ID, f.accounts[1].ID
	if l, err := s.SieveScripts(c, a); err != nil || len(l) != 0 {
		t.Fatalf("new account's scripts = %v, %v; want none", l, err)
	}
	if err := s.PutSieveScript(c, a, "rules", "keep;"); err != nil {
		t.Fatalf("PutSieveScript: %v", err)
	}
	if err := s.PutSieveScript(c, a, "Ünïcode name", "discard;"); err != nil {
		t.Fatalf("PutSieveScript: %v", err)
	}
	if err := s.PutSieveScript(c, a, "rules", "stop;"); err != nil {
		t.Fatalf("PutSieveScript (replace): %v", err)
	}
	l, err := s.SieveScripts(c, a)
	if err != nil || len(l) != 2 || l[0].Name != "rules" || l[0].Content != "stop;" || l[1].Name != "Ünïcode name" || l[0].Active || l[0].Updated.IsZero() {
		t.Fatalf("SieveScripts = %+v, %v", l, err)
	}
	if sc, err := s.SieveScript(c, a, "rules"); err != nil || sc.Content != "stop;" {
		t.Fatalf("SieveScript = %+v, %v", sc, err)
	}
	if _, err := s.SieveScript(c, a, "RULES"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("names are case-sensitive: SieveScript(RULES) = %v", err)
	}
	// Accounts are isolated.
	if _, err := s.SieveScript(c, b, "rules"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other account's script: %v", err)
	}
	if err := s.PutSieveScript(c, 999999, "x", "keep;"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutSieveScript for no account = %v; want ErrNotFound", err)
	}
	if err := s.PutSieveScript(c, a, "", "keep;"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("empty name = %v; want ErrInvalid", err)
	}
}

func testSieveActive(t *testing.T, s store.Store) {
	f := setup(t, s, 2)
	c := ctx(t)
	a, b := f.accounts[0].ID, f.accounts[1].ID
	if _, err := s.ActiveSieveScript(c, a); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ActiveSieveScript with no script = %v; want ErrNotFound", err)
	}
	for _, n := range []string{"one", "two"} {
		if err := s.PutSieveScript(c, a, n, "# "+n); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutSieveScript(c, b, "one", "# b"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetActiveSieveScript(c, a, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("activate a missing script = %v; want ErrNotFound", err)
	}
	for _, n := range []string{"one", "two", "two"} {
		if err := s.SetActiveSieveScript(c, a, n); err != nil {
			t.Fatalf("SetActiveSieveScript(%s): %v", n, err)
		}
		act, err := s.ActiveSieveScript(c, a)
		if err != nil || act.Name != n || act.Content != "# "+n || !act.Active {
			t.Fatalf("active after activating %s = %+v, %v", n, act, err)
		}
	}
	l, _ := s.SieveScripts(c, a)
	if len(l) != 2 || l[0].Active || !l[1].Active {
		t.Fatalf("exactly one active: %+v", l)
	}
	// Replacing the active script keeps it active.
	if err := s.PutSieveScript(c, a, "two", "# new"); err != nil {
		t.Fatal(err)
	}
	if act, err := s.ActiveSieveScript(c, a); err != nil || act.Content != "# new" {
		t.Fatalf("active after replace = %+v, %v", act, err)
	}
	if _, err := s.ActiveSieveScript(c, b); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other account has an active script: %v", err)
	}
	if err := s.SetActiveSieveScript(c, a, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ActiveSieveScript(c, a); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after deactivating: %v", err)
	}
}

func testSieveRenameDelete(t *testing.T, s store.Store) {
	f := setup(t, s, 1)
	c := ctx(t)
	a := f.accounts[0].ID
	for _, n := range []string{"a", "b"} {
		if err := s.PutSieveScript(c, a, n, "keep;"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetActiveSieveScript(c, a, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.RenameSieveScript(c, a, "a", "b"); !errors.Is(err, store.ErrExists) {
		t.Fatalf("rename onto an existing name = %v; want ErrExists", err)
	}
	if err := s.RenameSieveScript(c, a, "zz", "c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rename a missing script = %v; want ErrNotFound", err)
	}
	if err := s.RenameSieveScript(c, a, "a", "c"); err != nil {
		t.Fatal(err)
	}
	if act, err := s.ActiveSieveScript(c, a); err != nil || act.Name != "c" {
		t.Fatalf("the renamed active script stays active: %+v, %v", act, err)
	}
	if err := s.DeleteSieveScript(c, a, "c"); !errors.Is(err, store.ErrScriptActive) {
		t.Fatalf("delete the active script = %v; want ErrScriptActive", err)
	}
	if err := s.DeleteSieveScript(c, a, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSieveScript(c, a, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice = %v; want ErrNotFound", err)
	}
	if ok, err := s.ClaimVacationReply(c, a, "h", "x@y.org", time.Now(), time.Hour); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := s.ResetSieve(c, a); err != nil {
		t.Fatal(err)
	}
	if l, err := s.SieveScripts(c, a); err != nil || len(l) != 0 {
		t.Fatalf("after ResetSieve: %v, %v", l, err)
	}
	if ok, _ := s.ClaimVacationReply(c, a, "h", "x@y.org", time.Now(), time.Hour); !ok {
		t.Fatal("ResetSieve kept the vacation records")
	}
}

func testVacationClaims(t *testing.T, s store.Store) {
	f := setup(t, s, 2)
	c := ctx(t)
	a, b := f.accounts[0].ID, f.accounts[1].ID
	t0 := time.Unix(1_700_000_000, 0)
	day := 24 * time.Hour
	steps := []struct {
		acct   int64
		handle string
		sender string
		at     time.Time
		want   bool
	}{
		{a, "h", "Alice@Example.org", t0, true},
		{a, "h", "alice@example.org", t0.Add(time.Hour), false}, // same sender in any case
		{a, "h", "bob@example.org", t0.Add(time.Hour), true},
		{a, "h2", "alice@example.org", t0.Add(time.Hour), true}, // another handle
		{b, "h", "alice@example.org", t0.Add(time.Hour), true},  // another account
		{a, "h", "alice@example.org", t0.Add(7*day - time.Second), false},
		{a, "h", "alice@example.org", t0.Add(7 * day), true},
		{a, "h", "alice@example.org", t0.Add(8 * day), false},
	}
	for i, st := range steps {
		ok, err := s.ClaimVacationReply(c, st.acct, st.handle, st.sender, st.at, 7*day)
		if err != nil || ok != st.want {
			t.Fatalf("step %d: claim = %v, %v; want %v", i, ok, err, st.want)
		}
	}
	// Concurrent deliveries from one sender: one reply.
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.ClaimVacationReply(c, a, "h", "carol@example.org", t0, 7*day)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if granted != 1 {
		t.Fatalf("10 concurrent claims granted %d replies; want 1", granted)
	}
}

func testSieveAccountRemoved(t *testing.T, s store.Store) {
	f := setup(t, s, 1)
	c := ctx(t)
	a := f.accounts[0]
	if err := s.PutSieveScript(c, a.ID, "x", "keep;"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetActiveSieveScript(c, a.ID, "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveAccount(c, a.Address); err != nil {
		t.Fatal(err)
	}
	if l, err := s.SieveScripts(c, a.ID); err != nil || len(l) != 0 {
		t.Fatalf("scripts of a removed account: %v, %v", l, err)
	}
	if _, err := s.ActiveSieveScript(c, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("active script of a removed account: %v", err)
	}
}
