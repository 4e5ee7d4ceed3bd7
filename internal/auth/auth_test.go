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

	"pimail/internal/metrics"
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

// noWait replaces the throttle's sleeps with a record of them.
func (f *fixture) noWait() *[]time.Duration {
	var waits []time.Duration
	f.auth.sleep = func(_ context.Context, d time.Duration) error {
		f.mu.Lock()
		waits = append(waits, d)
		f.mu.Unlock()
		return nil
	}
	return &waits
}

func TestThrottlePerAddressAndAccount(t *testing.T) {
	f := newFixture(t, Limits{MaxFailures: 5, SourceFailures: 8, Window: 10 * time.Minute}, nil)
	waits := f.noWait()
	for i := 0; i < 5; i++ {
		if _, err := f.login("alice@example.org", "x", "203.0.113.9:4455"); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	// The pair is refused now, the right password too...
	if _, err := f.login("alice@example.org", "alice-pw", "203.0.113.9"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("after 5 failures: %v", err)
	}
	// ...but not the owner from elsewhere: the attacker's address is
	// what is throttled, not the account.
	if _, err := f.login("alice@example.org", "alice-pw", "203.0.113.10"); err != nil {
		t.Fatalf("other address: %v", err)
	}
	// Other accounts from the attacker's address, up to its own allowance.
	for i := 0; i < 3; i++ {
		if _, err := f.login(fmt.Sprintf("u%d@example.org", i), "x", "203.0.113.9"); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("other account %d: %v", i, err)
		}
	}
	if _, err := f.login("bob@example.org", "bob-pw", "203.0.113.9"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("address over its allowance: %v", err)
	}
	if !strings.Contains(f.logs.String(), `remote=203.0.113.9 user=alice@example.org reason="rate limited"`) {
		t.Errorf("rate limit not logged:\n%s", f.logs.String())
	}
	// Delays grow once the free failures are used: 3 free, then 1 s, 2 s.
	want := []time.Duration{0, 0, 0, time.Second, 2 * time.Second}
	if len(*waits) < 5 || fmt.Sprint((*waits)[:5]) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v first", *waits, want)
	}
	// The allowance leaks back: after the whole window, all of it.
	f.advance(10*time.Minute + time.Second)
	if _, err := f.login("alice@example.org", "alice-pw", "203.0.113.9"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// TestParallelAttemptsCountEach: attempts sent at once are each counted
// before any is checked, so no more than the allowance is ever checked,
// and the right password sent among them is refused.
func TestParallelAttemptsCountEach(t *testing.T) {
	f := newFixture(t, Limits{MaxFailures: 10, CacheTTL: -1}, nil)
	f.noWait()
	before := metrics.PasswordChecks.With("hash").Value()
	var wg sync.WaitGroup
	results := make(chan error, 60)
	for i := 0; i < 59; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := f.login("alice@example.org", fmt.Sprintf("guess-%d", i), "198.51.100.7")
			results <- err
		}(i)
	}
	wg.Wait()
	// The right password, sent last.
	_, err := f.login("alice@example.org", "alice-pw", "198.51.100.7")
	results <- err
	if !errors.Is(err, ErrRateLimited) {
		t.Errorf("the right password after 59 guesses: %v", err)
	}
	close(results)
	checked, limited := 0, 0
	for err := range results {
		switch {
		case errors.Is(err, ErrRateLimited):
			limited++
		case err == nil || errors.Is(err, ErrInvalidCredentials):
			checked++
		default:
			t.Fatal(err)
		}
	}
	if checked > 10 || checked+limited != 60 {
		t.Fatalf("%d checked, %d refused; want at most 10 checked", checked, limited)
	}
	if n := metrics.PasswordChecks.With("hash").Value() - before; n > 10 {
		t.Fatalf("%d password hashes checked", n)
	}
}

// TestAccountCeiling: guesses at one account from many addresses reach
// its ceiling; then new addresses are refused, and the owner's own
// address is slowed but let through.
func TestAccountCeiling(t *testing.T) {
	f := newFixture(t, Limits{AccountFailures: 20, AccountWindow: time.Hour}, nil)
	waits := f.noWait()
	if _, err := f.login("bob@example.org", "bob-pw", "192.0.2.50"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := f.login("bob@example.org", "guess", fmt.Sprintf("198.51.100.%d", i+1)); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if _, err := f.login("bob@example.org", "bob-pw", "198.51.100.200"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("new address past the ceiling: %v", err)
	}
	*waits = nil
	if _, err := f.login("bob@example.org", "bob-pw", "192.0.2.50"); err != nil {
		t.Fatalf("owner's address past the ceiling: %v", err)
	}
	if len(*waits) != 1 || (*waits)[0] != DefaultLimits.MaxDelay {
		t.Errorf("owner's wait %v, want %v", *waits, DefaultLimits.MaxDelay)
	}
	if _, err := f.login("alice@example.org", "alice-pw", "198.51.100.200"); err != nil {
		t.Fatalf("other account: %v", err)
	}
	f.advance(time.Hour + time.Minute)
	if _, err := f.login("bob@example.org", "bob-pw", "198.51.100.200"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestManyLoopbackLogins(t *testing.T) {
	f := newFixture(t, Limits{}, nil)
	waits := f.noWait()
	for i := 0; i < 200; i++ {
		if _, err := f.login("alice@example.org", "alice-pw", "127.0.0.1"); err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
		if i%50 == 0 {
			// Occasional typos below the limit do not lock anyone out.
			f.login("alice@example.org", "typo", "::1")
		}
	}
	f.mu.Lock()
	*waits = nil
	f.mu.Unlock()
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
	// Attempts under way are not failures: a client that opens many
	// connections at once is not slowed down.
	for _, w := range *waits {
		if w != 0 {
			t.Fatalf("a login waited %v", w)
		}
	}
}

// TestCache: a repeated login with the same password is answered without
// hashing; another password, a changed password and an expired entry
// are hashed again, and a failure is never remembered as a success.
func TestCache(t *testing.T) {
	f := newFixture(t, Limits{CacheTTL: time.Minute}, nil)
	f.noWait()
	hashes := func() uint64 { return metrics.PasswordChecks.With("hash").Value() }
	login := func(pw string, wantOK bool, wantHash uint64) {
		t.Helper()
		before := hashes()
		_, err := f.login("alice@example.org", pw, "192.0.2.1")
		if (err == nil) != wantOK {
			t.Fatalf("login %q: %v", pw, err)
		}
		if n := hashes() - before; n != wantHash {
			t.Fatalf("login %q: %d hashes, want %d", pw, n, wantHash)
		}
	}
	login("alice-pw", true, 1)
	login("alice-pw", true, 0)
	login("wrong", false, 1)
	login("wrong", false, 1)
	login("alice-pw", true, 0)
	f.advance(2 * time.Minute)
	login("alice-pw", true, 1)
	// A new password: the old one is not accepted from the cache.
	h, err := password.HashParams(context.Background(), "new-pw", fast)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetPassword(context.Background(), "alice@example.org", h); err != nil {
		t.Fatal(err)
	}
	login("alice-pw", false, 1)
	login("new-pw", true, 1)
	login("new-pw", true, 0)
}

func TestThrottleBounded(t *testing.T) {
	th := newThrottle(Limits{MaxFailures: 3, MaxEntries: 100}.withDefaults())
	now := time.Now()
	// A busy key survives eviction by a flood of fresh keys.
	clock := func() time.Time { return now }
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		a, _, _, _ := th.begin(ctx, "victim", "attacker", clock)
		a.end(failed, now)
	}
	for i := 0; i < 10000; i++ {
		a, _, refused, _ := th.begin(ctx, fmt.Sprintf("u%d", i), fmt.Sprintf("k%d", i), clock)
		if !refused {
			a.end(failed, now)
		}
		if n := len(th.sources.m) + len(th.pairs.m); n > 200 {
			t.Fatalf("%d entries", n)
		}
	}
	if _, _, refused, _ := th.begin(ctx, "victim", "attacker", clock); !refused {
		t.Error("a busy attacker's count was evicted by a flood")
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
