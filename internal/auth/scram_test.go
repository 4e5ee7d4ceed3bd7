package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/xdg-go/scram"

	"pimail/internal/password"
	"pimail/internal/store"
)

// setSCRAM stores SCRAM-SHA-256 keys for pw, as setting a password does.
func setSCRAM(t *testing.T, f *fixture, user, pw string) {
	t.Helper()
	k, err := password.SCRAMKeys(pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetSCRAM(context.Background(), user, k); err != nil {
		t.Fatal(err)
	}
}

// scramLogin runs a whole exchange with xdg-go/scram's client and returns
// the account, the server's first message and the error.
func scramLogin(f *fixture, user, pw, ip string) (store.Account, string, error) {
	ctx := context.Background()
	cl, err := scram.SHA256.NewClient(user, pw, "")
	if err != nil {
		return store.Account{}, "", err
	}
	conv := cl.NewConversation()
	sc, err := f.auth.NewSCRAM(ip)
	if err != nil {
		return store.Account{}, "", err
	}
	c1, _ := conv.Step("")
	s1, done, err := sc.Next(ctx, []byte(c1))
	if err != nil || done {
		return store.Account{}, string(s1), err
	}
	c2, err := conv.Step(string(s1))
	if err != nil {
		return store.Account{}, string(s1), err
	}
	s2, done, err := sc.Next(ctx, []byte(c2))
	if err != nil {
		return store.Account{}, string(s1), err
	}
	if !done {
		return store.Account{}, string(s1), errors.New("not done after client-final")
	}
	// The client checks the server's signature (mutual authentication).
	if _, err := conv.Step(string(s2)); err != nil || !conv.Valid() {
		return store.Account{}, string(s1), errors.New("server signature rejected")
	}
	acct, ok := sc.Account()
	if !ok {
		return store.Account{}, string(s1), errors.New("no account after done")
	}
	return acct, string(s1), nil
}

func TestSCRAM(t *testing.T) {
	f := newFixture(t, Limits{}, nil)
	setSCRAM(t, f, "alice@example.org", "alice-pw")
	acct, _, err := scramLogin(f, "alice@example.org", "alice-pw", "192.0.2.1")
	if err != nil || acct.Address != "alice@example.org" {
		t.Fatalf("scram login = %+v, %v", acct, err)
	}
	if strings.Contains(f.logs.String(), "authentication failed") {
		t.Errorf("success logged as failure:\n%s", f.logs)
	}

	cases := []struct{ user, pw, reason string }{
		{"alice@example.org", "wrong", "bad password"},
		{"nobody@example.org", "alice-pw", "unknown account"},
		{"bob@example.org", "bob-pw", "no scram keys"}, // bob has no keys
	}
	for _, c := range cases {
		before := strings.Count(f.logs.String(), "authentication failed")
		_, _, err := scramLogin(f, c.user, c.pw, "192.0.2.2")
		if !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("%s/%s: err = %v, want ErrInvalidCredentials", c.user, c.pw, err)
		}
		logs := f.logs.String()
		if strings.Count(logs, "authentication failed") != before+1 ||
			!strings.Contains(logs, `remote=192.0.2.2 user=`+c.user+` reason="`+c.reason+`"`) {
			t.Errorf("%s: failure not logged with reason %q:\n%s", c.user, c.reason, logs)
		}
	}

	// A disabled account fails even with the right password.
	if err := f.st.SetAccountDisabled(context.Background(), "alice@example.org", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := scramLogin(f, "alice@example.org", "alice-pw", "192.0.2.3"); !errors.Is(err, ErrInvalidCredentials) ||
		!strings.Contains(f.logs.String(), `reason="account disabled"`) {
		t.Errorf("disabled account: err = %v\n%s", err, f.logs)
	}
}

// An unknown user gets a server-first message like a real one, with the
// same salt every time, so the exchange does not reveal which names exist.
func TestSCRAMUnknownUserLooksReal(t *testing.T) {
	f := newFixture(t, Limits{}, nil)
	salt := func(user string) string {
		sc, err := f.auth.NewSCRAM("192.0.2.9")
		if err != nil {
			t.Fatal(err)
		}
		s1, _, err := sc.Next(context.Background(), []byte("n,,n="+user+",r=abcdefgh"))
		if err != nil {
			t.Fatalf("client-first of %s: %v", user, err)
		}
		_, s, ok := strings.Cut(string(s1), ",s=")
		if !ok {
			t.Fatalf("server-first %q", s1)
		}
		return s
	}
	if a, b := salt("ghost@example.org"), salt("ghost@example.org"); a != b || !strings.HasSuffix(a, ",i=4096") {
		t.Errorf("made-up salts differ or wrong count: %q %q", a, b)
	}
	if a, b := salt("ghost@example.org"), salt("other@example.org"); a == b {
		t.Errorf("two unknown users share a salt %q", a)
	}
}

// Failed proofs count in the same limiter as failed passwords: after
// MaxFailures of them, both SCRAM and password logins are refused.
func TestSCRAMRateLimit(t *testing.T) {
	f := newFixture(t, Limits{MaxFailures: 3}, nil)
	setSCRAM(t, f, "alice@example.org", "alice-pw")
	for i := 0; i < 3; i++ {
		if _, _, err := scramLogin(f, "alice@example.org", "nope", "198.51.100.1"); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if _, _, err := scramLogin(f, "alice@example.org", "alice-pw", "198.51.100.1"); !errors.Is(err, ErrRateLimited) {
		t.Errorf("scram after lockout: %v, want ErrRateLimited", err)
	}
	if _, err := f.login("alice@example.org", "alice-pw", "198.51.100.1"); !errors.Is(err, ErrRateLimited) {
		t.Errorf("password after scram lockout: %v, want ErrRateLimited", err)
	}
	// The owner, from another address, is not locked out.
	if _, _, err := scramLogin(f, "alice@example.org", "alice-pw", "198.51.100.2"); err != nil {
		t.Errorf("scram from another address: %v", err)
	}
}

// TestSCRAMStartedBeforeTheThrottle: exchanges started (client-first sent)
// before the address was throttled are refused at their final step, like
// new ones (issue 28: exchanges held open, the allowance used up
// meanwhile with wrong passwords, then the right proof sent on one).
func TestSCRAMStartedBeforeTheThrottle(t *testing.T) {
	f := newFixture(t, Limits{MaxFailures: 3}, nil)
	f.noWait()
	setSCRAM(t, f, "alice@example.org", "alice-pw")
	type held struct {
		sc    *SCRAM
		final string
	}
	var open []held
	for i := 0; i < 5; i++ {
		sc, err := f.auth.NewSCRAM("198.51.100.1")
		if err != nil {
			t.Fatal(err)
		}
		c, _ := scram.SHA256.NewClient("alice@example.org", "alice-pw", "")
		conv := c.NewConversation()
		first, _ := conv.Step("")
		s1, _, err := sc.Next(context.Background(), []byte(first))
		if err != nil {
			t.Fatal(err)
		}
		final, err := conv.Step(string(s1))
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, held{sc, final})
	}
	for i := 0; i < 3; i++ {
		if _, err := f.login("alice@example.org", "wrong", "198.51.100.1"); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatal(err)
		}
	}
	for i, h := range open {
		if _, _, err := h.sc.Next(context.Background(), []byte(h.final)); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("held exchange %d with the right proof: %v, want ErrRateLimited", i, err)
		}
	}
}

func TestSCRAMMalformed(t *testing.T) {
	f := newFixture(t, Limits{}, nil)
	sc, err := f.auth.NewSCRAM("192.0.2.5")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sc.Next(context.Background(), []byte("garbage")); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("garbage client-first: %v", err)
	}
	if _, _, err := sc.Next(context.Background(), []byte("n,,n=a,r=b")); err == nil {
		t.Error("Next after failure succeeded")
	}
}
