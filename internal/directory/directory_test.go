package directory

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

// fakeStore serves only the directory methods; the rest of store.Store is
// left nil and panics if called, which would be a bug in the view.
type fakeStore struct {
	store.Store
	mu      sync.Mutex
	dir     store.Directory
	fail    bool
	loads   int
	version int64
}

func (f *fakeStore) DirectoryVersion(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return 0, errors.New("database is locked")
	}
	return f.dir.Version, nil
}

func (f *fakeStore) Directory(context.Context) (store.Directory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return store.Directory{}, errors.New("database is locked")
	}
	f.loads++
	return f.dir, nil
}

func (f *fakeStore) set(fn func(d *store.Directory)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.dir)
	f.dir.Version++
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testDirectory() store.Directory {
	return store.Directory{
		Version: 1,
		Domains: []store.Domain{{ID: 1, Name: "example.com"}, {ID: 2, Name: "example.org"}, {ID: 3, Name: "xn--bcher-kva.example"}},
		Accounts: []store.Account{
			{ID: 10, Address: "alice@example.com"},
			{ID: 11, Address: "bob@example.com"},
			{ID: 12, Address: "carol@example.org"},
			{ID: 13, Address: "dave@example.com", Disabled: true},
			{ID: 14, Address: "al+ice@example.com"},
			{ID: 15, Address: "postmaster@example.org"},
			{ID: 16, Address: "buch@xn--bcher-kva.example"},
		},
		Aliases: []store.Alias{
			{Address: "team@example.com", Targets: []string{"alice@example.com", "Bob@Example.com", "alice+x@example.com", "friend@remote.test", "FRIEND@remote.test"}},
			{Address: "all@example.com", Targets: []string{"team@example.com", "carol@example.org"}},
			{Address: "loop1@example.com", Targets: []string{"loop2@example.com", "alice@example.com"}},
			{Address: "loop2@example.com", Targets: []string{"loop1@example.com", "bob@example.com"}},
			{Address: "dead@example.com", Targets: []string{"nobody@example.com", "dave@example.com"}},
			{Address: "fwd@example.com", Targets: []string{"Someone@Remote.test"}},
			{Address: "@example.org", Targets: []string{"carol@example.org"}},
			{Address: "deep0@example.com", Targets: []string{"deep1@example.com"}},
		},
	}
}

func startView(t *testing.T, f *fakeStore) *View {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v := New(f, quiet())
	if err := v.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return v
}

func TestResolve(t *testing.T) {
	v := startView(t, &fakeStore{dir: testDirectory()})
	tests := []struct {
		addr     string
		accounts []int64
		remote   []string
		err      error
	}{
		{addr: "alice@example.com", accounts: []int64{10}},
		{addr: "ALICE@EXAMPLE.COM", accounts: []int64{10}},
		{addr: " alice@example.com ", accounts: []int64{10}},
		{addr: "alice+news@example.com", accounts: []int64{10}},
		{addr: "alice+a+b@example.com", accounts: []int64{10}},
		{addr: "al+ice@example.com", accounts: []int64{14}}, // exact match wins over subaddress
		{addr: "+alice@example.com", err: ErrUnknownUser},
		{addr: "team@example.com", accounts: []int64{10, 11}, remote: []string{"friend@remote.test"}},
		{addr: "team+x@example.com", accounts: []int64{10, 11}, remote: []string{"friend@remote.test"}},
		{addr: "all@example.com", accounts: []int64{10, 11, 12}, remote: []string{"friend@remote.test"}},
		{addr: "loop1@example.com", accounts: []int64{11, 10}},
		{addr: "loop2@example.com", accounts: []int64{10, 11}},
		{addr: "dead@example.com", err: ErrUnknownUser},
		{addr: "dave@example.com", err: ErrUnknownUser}, // disabled
		{addr: "dave+x@example.com", err: ErrUnknownUser},
		{addr: "fwd@example.com", remote: []string{"Someone@Remote.test"}},
		{addr: "nobody@example.com", err: ErrUnknownUser},
		{addr: "nobody@example.org", accounts: []int64{12}}, // catch-all
		{addr: "carol+x@example.org", accounts: []int64{12}},
		{addr: "postmaster@example.org", accounts: []int64{15}}, // account beats catch-all
		{addr: "postmaster", accounts: []int64{15}},
		{addr: "PostMaster", accounts: []int64{15}},
		{addr: "alice", err: ErrUnknownUser},
		{addr: "alice@remote.test", err: ErrNotLocalDomain},
		{addr: "alice@example.com.evil.test", err: ErrNotLocalDomain},
		{addr: "alice@[127.0.0.1]", err: ErrNotLocalDomain},
		{addr: "", err: ErrUnknownUser},
		{addr: "buch@bücher.example", accounts: []int64{16}},
		{addr: "buch@xn--bcher-kva.example", accounts: []int64{16}},
		{addr: "deep0@example.com", err: ErrUnknownUser},
	}
	for _, tc := range tests {
		r, err := v.Resolve(tc.addr)
		if !errors.Is(err, tc.err) {
			t.Errorf("Resolve(%q) error = %v, want %v", tc.addr, err, tc.err)
			continue
		}
		if !slices.Equal(r.Accounts, tc.accounts) || !slices.Equal(r.Remote, tc.remote) {
			t.Errorf("Resolve(%q) = %v %v, want %v %v", tc.addr, r.Accounts, r.Remote, tc.accounts, tc.remote)
		}
	}
}

func TestAliasDepthBounded(t *testing.T) {
	d := testDirectory()
	// chain0 → chain1 → … → chain30 → alice: deeper than MaxAliasDepth.
	for i := 0; i < 30; i++ {
		d.Aliases = append(d.Aliases, store.Alias{
			Address: "chain" + itoa(i) + "@example.com",
			Targets: []string{"chain" + itoa(i+1) + "@example.com"},
		})
	}
	d.Aliases = append(d.Aliases, store.Alias{Address: "chain30@example.com", Targets: []string{"alice@example.com"}})
	v := startView(t, &fakeStore{dir: d})
	if _, err := v.Resolve("chain0@example.com"); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("deep chain: err = %v, want ErrUnknownUser (cut at depth %d)", err, MaxAliasDepth)
	}
	if r, err := v.Resolve("chain25@example.com"); err != nil || !slices.Equal(r.Accounts, []int64{10}) {
		t.Fatalf("short chain: %v %v", r, err)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestIsLocalDomain(t *testing.T) {
	v := startView(t, &fakeStore{dir: testDirectory()})
	for d, want := range map[string]bool{
		"example.com": true, "EXAMPLE.org": true, "bücher.example": true,
		"remote.test": false, "": false, "com": false,
	} {
		if got := v.IsLocalDomain(d); got != want {
			t.Errorf("IsLocalDomain(%q) = %v, want %v", d, got, want)
		}
	}
}

func TestNotReadyBeforeLoad(t *testing.T) {
	v := New(&fakeStore{dir: testDirectory()}, quiet())
	if _, err := v.Resolve("alice@example.com"); !errors.Is(err, ErrNotReady) {
		t.Fatalf("err = %v, want ErrNotReady", err)
	}
}

func TestStartFailsWhenFirstLoadFails(t *testing.T) {
	v := New(&fakeStore{dir: testDirectory(), fail: true}, quiet())
	if err := v.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded on a failing store")
	}
}

// waitFor polls cond for up to a second.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 1s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReloadOnVersionChange(t *testing.T) {
	f := &fakeStore{dir: testDirectory()}
	v := startView(t, f)
	if _, err := v.Resolve("erin@example.com"); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("before: %v", err)
	}
	f.set(func(d *store.Directory) {
		d.Accounts = append(d.Accounts, store.Account{ID: 20, Address: "erin@example.com"})
	})
	waitFor(t, "new account visible", func() bool {
		r, err := v.Resolve("erin@example.com")
		return err == nil && slices.Equal(r.Accounts, []int64{20})
	})

	// While the store fails, the last snapshot keeps answering.
	f.mu.Lock()
	f.fail = true
	f.mu.Unlock()
	time.Sleep(3 * PollInterval)
	if _, err := v.Resolve("erin@example.com"); err != nil {
		t.Fatalf("during store failure: %v", err)
	}
	f.mu.Lock()
	f.fail = false
	f.mu.Unlock()
	f.set(func(d *store.Directory) { d.Accounts[0].Disabled = true })
	waitFor(t, "disabled account stops receiving", func() bool {
		_, err := v.Resolve("alice@example.com")
		return errors.Is(err, ErrUnknownUser)
	})
}

// TestLimited: the accounts with a storage limit are known from the
// directory, a new limit after the next load; before the first load every
// account counts as limited.
func TestLimited(t *testing.T) {
	f := &fakeStore{dir: testDirectory()}
	if !New(f, quiet()).Limited(10) {
		t.Fatal("account unlimited before the first load")
	}
	f.set(func(d *store.Directory) { d.Accounts[1].QuotaBytes = 1 << 20 })
	v := startView(t, f)
	if v.Limited(10) || !v.Limited(11) {
		t.Fatalf("Limited(10), Limited(11) = %v, %v; want false, true", v.Limited(10), v.Limited(11))
	}
	f.set(func(d *store.Directory) { d.Accounts[0].QuotaBytes = 1 })
	waitFor(t, "new limit known", func() bool { return v.Limited(10) })
}

func TestNoReloadWithoutVersionChange(t *testing.T) {
	f := &fakeStore{dir: testDirectory()}
	startView(t, f)
	time.Sleep(4 * PollInterval)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loads != 1 {
		t.Fatalf("Directory loaded %d times with an unchanged version, want 1", f.loads)
	}
}

func TestPollStopsWithContext(t *testing.T) {
	f := &fakeStore{dir: testDirectory()}
	ctx, cancel := context.WithCancel(context.Background())
	v := New(f, quiet())
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(2 * PollInterval)
	f.set(func(d *store.Directory) {
		d.Accounts = append(d.Accounts, store.Account{ID: 21, Address: "late@example.com"})
	})
	time.Sleep(3 * PollInterval)
	if _, err := v.Resolve("late@example.com"); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("view reloaded after its context ended: %v", err)
	}
}

func TestResolveAllocations(t *testing.T) {
	v := startView(t, &fakeStore{dir: testDirectory()})
	n := testing.AllocsPerRun(200, func() {
		_, _ = v.Resolve("team@example.com")
		_, _ = v.Resolve("nobody@example.com")
		_, _ = v.Resolve("x@remote.test")
	})
	if n > 0 {
		t.Fatalf("Resolve of lower-case addresses allocates %.1f times per run, want 0", n)
	}
}

func BenchmarkResolveUnknown(b *testing.B) {
	f := &fakeStore{dir: testDirectory()}
	v := New(f, quiet())
	if err := v.Reload(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = v.Resolve("No.Such.User@Example.com")
	}
}
