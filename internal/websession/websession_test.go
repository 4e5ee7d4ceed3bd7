package websession

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

// testStore is a store with accounts 1 (a@example.com), 2 and 3.
func testStore(t *testing.T) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: slog.New(slog.DiscardHandler), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.AddDomain(ctx, "example.com"); err != nil {
		t.Fatal(err)
	}
	for i, a := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		if acc, err := st.AddAccount(ctx, a, "h"); err != nil || acc.ID != int64(i+1) {
			t.Fatalf("account %s: %+v, %v", a, acc, err)
		}
	}
	return st
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	st := testStore(t)
	ss := New(st, "webmail", time.Hour, 2)
	get := func(id string, at time.Time) *Session {
		t.Helper()
		s, err := ss.Get(ctx, id, at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, err := ss.Create(ctx, 1, "a@example.com", "", now)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == a.CSRF || len(a.ID) != 43 || len(a.CSRF) != 43 {
		t.Fatalf("tokens %q %q", a.ID, a.CSRF)
	}
	if s := get(a.ID, now.Add(59*time.Minute)); s == nil || s.AccountID != 1 || s.Address != "a@example.com" || s.CSRF != a.CSRF {
		t.Fatalf("live session: %+v", s)
	}
	// Get refreshed the idle timer: still alive an hour after creation.
	if alive, err := ss.Alive(ctx, a, now.Add(118*time.Minute)); err != nil || !alive {
		t.Fatalf("refreshed session expired: %v", err)
	}
	if s := get(a.ID, now.Add(3*time.Hour)); s != nil {
		t.Fatal("idle session did not expire")
	}
	if alive, err := ss.Alive(ctx, a, now.Add(3*time.Hour)); err != nil || alive {
		t.Fatalf("idle session alive: %v", err)
	}
	// The store holds a digest of the cookie, never the cookie.
	if _, err := st.Session(ctx, "webmail", a.ID, now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the store found the session by its cookie: %v", err)
	}
	// An account keeps at most 2: a new login ends the least recently used.
	b, _ := ss.Create(ctx, 2, "b@example.com", "", now)
	c, _ := ss.Create(ctx, 2, "b@example.com", "", now.Add(2*time.Minute))
	get(b.ID, now.Add(4*time.Minute)) // b is used, c is not
	d, _ := ss.Create(ctx, 2, "b@example.com", "", now.Add(5*time.Minute))
	if get(c.ID, now.Add(6*time.Minute)) != nil {
		t.Fatal("least recently used session kept beyond the bound")
	}
	for _, s := range []*Session{b, d} {
		if get(s.ID, now.Add(6*time.Minute)) == nil {
			t.Fatalf("session %s dropped", s.ID)
		}
	}
	e, _ := ss.Create(ctx, 3, "c@example.com", "", now)
	f, _ := ss.Create(ctx, 3, "c@example.com", "", now)
	if err := ss.DeleteAccount(ctx, 3, f); err != nil {
		t.Fatal(err)
	}
	if get(e.ID, now) != nil || get(f.ID, now) == nil {
		t.Fatal("DeleteAccount ended the wrong sessions")
	}
	if err := ss.Delete(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if get(f.ID, now) != nil {
		t.Fatal("Delete kept the session")
	}
	// Another program's table does not see these sessions.
	if s, err := New(st, "admin", time.Hour, 2).Get(ctx, b.ID, now); err != nil || s != nil {
		t.Fatalf("the admin found a webmail session: %+v, %v", s, err)
	}
	if !ss.OpenStream(b, 2) || !ss.OpenStream(b, 2) || ss.OpenStream(b, 2) {
		t.Fatal("stream limit not kept")
	}
	ss.CloseStream(b)
	if !ss.OpenStream(b, 2) {
		t.Fatal("closed stream still counted")
	}
	if get("", now) != nil {
		t.Fatal("empty id matched")
	}
}

// TestSurvivesRestart: a session lives in the store, not in the process.
func TestSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	now := time.Now()
	a, err := New(st, "webmail", time.Hour, 10).Create(ctx, 1, "a@example.com", "", now)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := New(st, "webmail", time.Hour, 10).Get(ctx, a.ID, now.Add(time.Minute)); err != nil || s == nil || s.CSRF != a.CSRF {
		t.Fatalf("a new table (a restart, another node) lost the session: %+v, %v", s, err)
	}
}

func TestTokenEqual(t *testing.T) {
	if TokenEqual("", "") || TokenEqual("a", "") || !TokenEqual("abc", "abc") || TokenEqual("abc", "abd") {
		t.Fatal("TokenEqual")
	}
}

func TestCrossOrigin(t *testing.T) {
	for _, c := range []struct {
		site, origin string
		nullOK, want bool
	}{
		{"", "", false, false},
		{"same-origin", "", false, false},
		{"none", "", false, false},
		{"same-site", "", true, true},
		{"cross-site", "", true, true},
		{"", "http://mail.example.com", false, false},
		{"", "http://MAIL.example.com", false, false},
		{"", "http://evil.example", true, true},
		{"same-origin", "http://evil.example", true, true},
		{"", "null", true, false},
		{"", "null", false, true},
		{"same-origin", "null", false, false},
		{"cross-site", "null", true, true},
		{"", "%zz", true, true},
	} {
		r := httptest.NewRequest("POST", "http://mail.example.com/act", nil)
		if c.site != "" {
			r.Header.Set("Sec-Fetch-Site", c.site)
		}
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if got := CrossOrigin(r, c.nullOK); got != c.want {
			t.Errorf("Sec-Fetch-Site %q Origin %q nullOK %v: %v, want %v", c.site, c.origin, c.nullOK, got, c.want)
		}
	}
}

// TestRecheck: a session read from the store is used again for recheck;
// one ended through another table (another node) opens pages for at most
// that long, one ended through this table at once.
func TestRecheck(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	now := time.Now()
	here, there := New(st, "webmail", time.Hour, 10), New(st, "webmail", time.Hour, 10)
	a, _ := here.Create(ctx, 1, "a@example.com", "", now)
	b, _ := here.Create(ctx, 1, "a@example.com", "", now)
	for _, s := range []*Session{a, b} {
		if g, err := here.Get(ctx, s.ID, now); err != nil || g == nil {
			t.Fatalf("Get: %+v, %v", g, err)
		}
	}
	if err := there.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if g, _ := here.Get(ctx, a.ID, now.Add(recheck/2)); g == nil {
		t.Fatal("a session read just now was read again (or not kept)")
	}
	if g, _ := here.Get(ctx, a.ID, now.Add(recheck)); g != nil {
		t.Fatal("a session ended through another table still opens pages after recheck")
	}
	if err := here.Delete(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if g, _ := here.Get(ctx, b.ID, now.Add(recheck/2)); g != nil {
		t.Fatal("a session ended through this table opened a page")
	}
	// A password change here ends the account's other sessions here at once.
	c, _ := here.Create(ctx, 2, "b@example.com", "", now)
	d, _ := here.Create(ctx, 2, "b@example.com", "", now)
	here.Get(ctx, c.ID, now)
	here.Get(ctx, d.ID, now)
	if err := here.DeleteAccount(ctx, 2, d); err != nil {
		t.Fatal(err)
	}
	if g, _ := here.Get(ctx, c.ID, now.Add(recheck/2)); g != nil {
		t.Fatal("DeleteAccount left a session open here")
	}
	if g, _ := here.Get(ctx, d.ID, now.Add(recheck/2)); g == nil {
		t.Fatal("DeleteAccount ended the kept session")
	}
}

// BenchmarkGet is a request's session check: "store" reads the session
// every time (a request more than recheck after the last), "recent" within
// recheck of the last read.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(b.TempDir(), sqlite.Options{Logger: slog.New(slog.DiscardHandler), CollectInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	st.AddDomain(ctx, "example.com")
	st.AddAccount(ctx, "a@example.com", "h")
	ss := New(st, "webmail", 24*time.Hour, 10)
	now := time.Now()
	s, err := ss.Create(ctx, 1, "a@example.com", "", now)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		step time.Duration
	}{{"store", recheck}, {"recent", 0}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			at := now
			for b.Loop() {
				at = at.Add(c.step)
				if g, err := ss.Get(ctx, s.ID, at); err != nil || g == nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestListAndEnd: an account sees its own sessions, marked which is the
// asking one, and can end one of them, but never another account's.
func TestListAndEnd(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	ss := New(testStore(t), "webmail", time.Hour, 10)
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.7:4000"
	r.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")
	if d := Describe(r); d != "Firefox on Linux, 192.0.2.7" {
		t.Errorf("Describe: %q", d)
	}
	a1, _ := ss.Create(ctx, 1, "a@example.com", Describe(r), now)
	a2, _ := ss.Create(ctx, 1, "a@example.com", "other", now.Add(time.Second))
	b, _ := ss.Create(ctx, 2, "b@example.com", "b's", now)
	l, err := ss.List(ctx, a1, now.Add(2*time.Second))
	if err != nil || len(l) != 2 || l[0].Client != "other" || l[0].Current || !l[1].Current || l[1].Client != "Firefox on Linux, 192.0.2.7" {
		t.Fatalf("List: %+v, %v", l, err)
	}
	lb, _ := ss.List(ctx, b, now)
	if err := ss.End(ctx, a1, lb[0].Key, now); err != nil {
		t.Fatal(err)
	}
	if s, _ := ss.Get(ctx, b.ID, now); s == nil {
		t.Fatal("an account ended another account's session")
	}
	if s, _ := ss.Get(ctx, a2.ID, now); s == nil { // read, so that End must drop it from the recent ones
		t.Fatal("a2 not live")
	}
	if err := ss.End(ctx, a1, l[0].Key, now); err != nil {
		t.Fatal(err)
	}
	if s, _ := ss.Get(ctx, a2.ID, now); s != nil {
		t.Fatal("an ended session still opens pages")
	}
}
