package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"pimail/internal/password"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

// fast hashing parameters keep the tests quick; Verify reads them from
// the stored hash.
var fast = password.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fixture is an Authenticator over a real SQLite store with accounts
// alice@example.org (password "alice-pw") and bob@example.org ("bob-pw").
type fixture struct {
	st   *sqlite.Store
	auth *Authenticator
	logs *syncBuffer
	now  time.Time
	mu   sync.Mutex
}

func newFixture(t *testing.T, limits Limits, wrap func(store.Store) store.Store) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		h, err := password.HashParams(ctx, u+"-pw", fast)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddAccount(ctx, u+"@example.org", h); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{st: st, logs: &syncBuffer{}, now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
	var s store.Store = st
	if wrap != nil {
		s = wrap(st)
	}
	logger := slog.New(slog.NewTextHandler(f.logs, nil))
	f.auth = NewWithLimits(s, logger, limits)
	f.auth.now = func() time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.now
	}
	return f
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fixture) login(user, pw, ip string) (store.Account, error) {
	return f.auth.Authenticate(context.Background(), user, pw, ip)
}

func TestAuthenticate(t *testing.T) {
	f := newFixture(t, Limits{}, nil)
	acct, err := f.login(" Alice@Example.ORG", "alice-pw", "127.0.0.1")
	if err != nil || acct.Address != "alice@example.org" || acct.ID == 0 {
		t.Fatalf("login = %+v, %v", acct, err)
	}
	if f.auth.dummy != "" {
		t.Error("dummy hash computed for a known account")
	}
	for _, c := range []struct{ user, pw string }{
		{"alice@example.org", "bob-pw"},
		{"alice@example.org", ""},
		{"nobody@example.org", "alice-pw"},
		{"alice", "alice-pw"},
	} {
		acct, err := f.login(c.user, c.pw, "192.0.2.1")
		if !errors.Is(err, ErrInvalidCredentials) || acct.ID != 0 {
			t.Errorf("login(%q, %q) = %+v, %v", c.user, c.pw, acct, err)
		}
	}
	// Unknown accounts cost a real hash verification too.
	if !strings.HasPrefix(f.auth.dummy, "$argon2id$") {
		t.Errorf("no dummy hash work for unknown accounts: %q", f.auth.dummy)
	}
	logs := f.logs.String()
	for _, want := range []string{
		`level=WARN msg="authentication failed" remote=192.0.2.1 user=alice@example.org reason="bad password"`,
		`remote=192.0.2.1 user=nobody@example.org reason="unknown account"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "alice-pw") || strings.Contains(logs, "bob-pw") {
		t.Error("password in logs")
	}
}

// disabledStore reports every account as disabled.
type disabledStore struct{ store.Store }

func (d disabledStore) Account(ctx context.Context, address string) (store.Account, error) {
	a, err := d.Store.Account(ctx, address)
	a.Disabled = true
	return a, err
}

func TestDisabledAccount(t *testing.T) {
	f := newFixture(t, Limits{}, func(s store.Store) store.Store { return disabledStore{s} })
	_, err := f.login("alice@example.org", "alice-pw", "127.0.0.1")
	if !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("disabled login: %v", err)
	}
	if !strings.Contains(f.logs.String(), `reason="account disabled"`) {
		t.Errorf("logs: %s", f.logs.String())
	}
}

// brokenStore fails every lookup.
type brokenStore struct{ store.Store }

func (brokenStore) Account(context.Context, string) (store.Account, error) {
	return store.Account{}, fmt.Errorf("disk on fire")
}

func TestStoreError(t *testing.T) {
	f := newFixture(t, Limits{}, func(s store.Store) store.Store { return brokenStore{s} })
	_, err := f.login("alice@example.org", "alice-pw", "127.0.0.1")
	if err == nil || errors.Is(err, ErrInvalidCredentials) || errors.Is(err, ErrRateLimited) {
		t.Fatalf("store failure gave %v", err)
	}
}

func TestRateLimitPerIP(t *testing.T) {
	f := newFixture(t, Limits{MaxFailures: 5}, nil)
	for i := 0; i < 5; i++ {
		// Different accounts, one address.
		if _, err := f.login(fmt.Sprintf("user%d@example.org", i%2), "x", "203.0.113.9:4455"); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	// Now even the right password is refused from that address...
	if _, err := f.login("alice@example.org", "alice-pw", "203.0.113.9"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("after 5 failures: %v", err)
	}
	// ...but not from another one.
	if _, err := f.login("alice@example.org", "alice-pw", "203.0.113.10"); err != nil {
		t.Fatalf("other address: %v", err)
	}
	if !strings.Contains(f.logs.String(), `remote=203.0.113.9 user=alice@example.org reason="rate limited"`) {
		t.Errorf("rate limit not logged:\n%s", f.logs.String())
	}
	// The lockout ends.
	f.advance(DefaultLimits.Lockout + time.Second)
	if _, err := f.login("alice@example.org", "alice-pw", "203.0.113.9"); err != nil {
		t.Fatalf("after lockout: %v", err)
	}
}

func TestRateLimitPerAccount(t *testing.T) {
	f := newFixture(t, Limits{MaxFailures: 4, Lockout: time.Minute}, nil)
	for i := 0; i < 4; i++ {
		ip := fmt.Sprintf("198.51.100.%d", i+1)
		if _, err := f.login("bob@example.org", "guess", ip); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if _, err := f.login("BOB@example.org", "bob-pw", "198.51.100.200"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("locked account: %v", err)
	}
	if _, err := f.login("alice@example.org", "alice-pw", "198.51.100.200"); err != nil {
		t.Fatalf("other account: %v", err)
	}
	f.advance(2 * time.Minute)
	if _, err := f.login("bob@example.org", "bob-pw", "198.51.100.200"); err != nil {
		t.Fatalf("after lockout: %v", err)
	}
}

func TestFailuresExpire(t *testing.T) {
	f := newFixture(t, Limits{MaxFailures: 3, Window: time.Minute}, nil)
	// Two failures per window never reach the limit of three.
	for round := 0; round < 5; round++ {
		for i := 0; i < 2; i++ {
			if _, err := f.login("alice@example.org", "wrong", "127.0.0.1"); !errors.Is(err, ErrInvalidCredentials) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		f.advance(2 * time.Minute)
	}
}

func TestManyLoopbackLogins(t *testing.T) {
	f := newFixture(t, Limits{}, nil)
	for i := 0; i < 200; i++ {
		if _, err := f.login("alice@example.org", "alice-pw", "127.0.0.1"); err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
		if i%50 == 0 {
			// Occasional typos below the limit do not lock anyone out.
			f.login("alice@example.org", "typo", "::1")
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.login("bob@example.org", "bob-pw", "::1"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestLimiterBounded(t *testing.T) {
	l := newLimiter(Limits{MaxFailures: 3, Window: time.Minute, Lockout: time.Hour, MaxEntries: 100})
	now := time.Now()
	// A blocked key survives eviction by a flood of fresh keys.
	for i := 0; i < 3; i++ {
		l.fail("attacker", now)
	}
	for i := 0; i < 10000; i++ {
		l.fail(fmt.Sprintf("k%d", i), now)
		if n := l.len(); n > 100 {
			t.Fatalf("%d entries", n)
		}
	}
	if !l.blocked("attacker", now) {
		t.Error("blocked key evicted by a flood")
	}
}

func TestRemoteKey(t *testing.T) {
	cases := []struct{ in, key, ip string }{
		{"192.0.2.1", "192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:993", "192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1", "192.0.2.1"},
		{"[2001:db8:1:2:3::4]:143", "2001:db8:1:2::/64", "2001:db8:1:2:3::4"},
		{"2001:db8:1:2:ffff::9", "2001:db8:1:2::/64", "2001:db8:1:2:ffff::9"},
		{"not an ip", "?not an ip", "not an ip"},
	}
	for _, c := range cases {
		k, ip := remoteKey(c.in)
		if k != c.key || ip != c.ip {
			t.Errorf("remoteKey(%q) = %q, %q; want %q, %q", c.in, k, ip, c.key, c.ip)
		}
	}
}

// The IMAP server (and the other protocols) take an authenticator of this
// shape.
var _ interface {
	Authenticate(ctx context.Context, username, password, remoteIP string) (store.Account, error)
} = (*Authenticator)(nil)
