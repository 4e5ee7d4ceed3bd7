package auth

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// node is another Authenticator on the fixture's store and clock: a
// second pimail node on the same database, or this one restarted.
func (f *fixture) node(t *testing.T, l Limits) *Authenticator {
	t.Helper()
	a := NewWithLimits(f.st, slog.New(slog.NewTextHandler(io.Discard, nil)), l)
	a.now = f.auth.now
	a.sleep = f.auth.sleep
	if err := a.join(context.Background(), f.st); err != nil {
		t.Fatal(err)
	}
	return a
}

// exchange runs one round of Share's loop on each node, in order.
func exchange(t *testing.T, nodes ...*Authenticator) {
	t.Helper()
	for _, a := range nodes {
		if err := a.exchange(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSharedThrottle: failures of one account from one address spread
// over two nodes are refused at the allowance of one node, on both; a
// node started afterwards (a restart) knows them; a success on one node
// clears the pair on the other; the allowance leaks back on all.
func TestSharedThrottle(t *testing.T) {
	l := Limits{MaxFailures: 4, SourceFailures: 100, FreeFailures: 100, Window: 10 * time.Minute, CacheTTL: -1}
	f := newFixture(t, l, nil)
	f.noWait()
	if err := f.auth.join(context.Background(), f.st); err != nil {
		t.Fatal(err)
	}
	a := f.auth
	b := f.node(t, l)
	fail := func(n *Authenticator, src string) {
		t.Helper()
		if _, err := n.Authenticate(context.Background(), "alice@example.org", "guess", src); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("a guess from %s: %v, want ErrInvalidCredentials", src, err)
		}
	}
	login := func(n *Authenticator, src string) error {
		_, err := n.Authenticate(context.Background(), "alice@example.org", "alice-pw", src)
		return err
	}
	const attacker = "203.0.113.9"
	fail(a, attacker)
	fail(b, attacker)
	exchange(t, a, b, a)
	fail(a, attacker)
	fail(b, attacker)
	exchange(t, a, b, a)
	for name, n := range map[string]*Authenticator{"A": a, "B": b} {
		if err := login(n, attacker); !errors.Is(err, ErrRateLimited) {
			t.Errorf("node %s after 4 failures over both: %v, want ErrRateLimited", name, err)
		}
	}
	restarted := f.node(t, l)
	if err := login(restarted, attacker); !errors.Is(err, ErrRateLimited) {
		t.Errorf("a node started after them: %v, want ErrRateLimited", err)
	}
	if err := login(b, "198.51.100.1"); err != nil {
		t.Errorf("the owner from elsewhere: %v", err)
	}

	// A success on B clears the pair on A: two failures on A, a
	// success on B from the same address, and A has the whole
	// allowance again.
	const owner = "192.0.2.50"
	fail(a, owner)
	fail(a, owner)
	exchange(t, a, b)
	if err := login(b, owner); err != nil {
		t.Fatalf("the owner's login on B: %v", err)
	}
	exchange(t, b, a)
	for range 3 {
		fail(a, owner)
	}
	if err := login(a, owner); err != nil {
		t.Errorf("on A after B's success and 3 more failures: %v (B's success did not clear A's count)", err)
	}

	// The allowance leaks back on every node, also for failures read
	// from the log.
	f.advance(10*time.Minute + time.Second)
	exchange(t, a, b, restarted)
	for name, n := range map[string]*Authenticator{"A": a, "B": b, "restarted": restarted} {
		if err := login(n, attacker); err != nil {
			t.Errorf("node %s after the window: %v", name, err)
		}
	}
}

// TestUncheckedNotSuccess: an attempt that ends before its password is
// checked (the client leaves during the throttle's wait) counts as
// nothing. It used to count as a success: the pair's failures were
// cleared and the address became one of the account's, so an attacker
// who hung up during every wait kept the allowance.
func TestUncheckedNotSuccess(t *testing.T) {
	f := newFixture(t, Limits{MaxFailures: 4, FreeFailures: 1, CacheTTL: -1}, nil)
	f.auth.sleep = func(_ context.Context, d time.Duration) error {
		if d > 0 {
			return context.Canceled
		}
		return nil
	}
	if _, err := f.login("alice@example.org", "x", "203.0.113.9"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatal(err)
	}
	if _, err := f.login("alice@example.org", "x", "203.0.113.9"); !errors.Is(err, context.Canceled) {
		t.Fatalf("during the wait: %v, want context.Canceled", err)
	}
	f.noWait()
	for i := range 3 {
		if _, err := f.login("alice@example.org", "x", "203.0.113.9"); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("failure %d: %v", i+2, err)
		}
	}
	if _, err := f.login("alice@example.org", "alice-pw", "203.0.113.9"); !errors.Is(err, ErrRateLimited) {
		t.Errorf("after 4 failures and a login abandoned during the wait: %v, want ErrRateLimited", err)
	}
}
