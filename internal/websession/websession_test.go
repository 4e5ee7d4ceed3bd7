package websession

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestStore(t *testing.T) {
	now := time.Now()
	ss := New(time.Hour, 3)
	a := ss.Create(1, "a@example.com", now)
	if a.ID == a.CSRF || len(a.ID) != 43 || len(a.CSRF) != 43 {
		t.Fatalf("tokens %q %q", a.ID, a.CSRF)
	}
	if s, ok := ss.Get(a.ID, now.Add(59*time.Minute)); !ok || s != a {
		t.Fatal("live session not found")
	}
	// Get refreshed the idle timer: still alive an hour after creation.
	if !ss.Alive(a.ID, now.Add(119*time.Minute)) {
		t.Fatal("refreshed session expired")
	}
	if _, ok := ss.Get(a.ID, now.Add(3*time.Hour)); ok || ss.Alive(a.ID, now.Add(3*time.Hour)) {
		t.Fatal("idle session did not expire")
	}
	// The table is bounded: the least recently used goes first.
	b := ss.Create(2, "b@example.com", now)
	c := ss.Create(2, "b@example.com", now.Add(time.Second))
	ss.Get(b.ID, now.Add(2*time.Second))
	d := ss.Create(3, "c@example.com", now.Add(3*time.Second))
	e := ss.Create(3, "c@example.com", now.Add(4*time.Second))
	if _, ok := ss.Get(c.ID, now.Add(5*time.Second)); ok {
		t.Fatal("least recently used session kept beyond the bound")
	}
	for _, s := range []*Session{b, d, e} {
		if _, ok := ss.Get(s.ID, now.Add(5*time.Second)); !ok {
			t.Fatalf("session of %s dropped", s.Address)
		}
	}
	ss.DeleteAccount(3, e.ID)
	if _, ok := ss.Get(d.ID, now.Add(6*time.Second)); ok {
		t.Fatal("DeleteAccount kept a session")
	}
	if _, ok := ss.Get(e.ID, now.Add(6*time.Second)); !ok {
		t.Fatal("DeleteAccount dropped the kept session")
	}
	ss.Delete(e.ID)
	if _, ok := ss.Get(e.ID, now.Add(6*time.Second)); ok {
		t.Fatal("Delete kept the session")
	}
	if !ss.OpenStream(b, 2) || !ss.OpenStream(b, 2) || ss.OpenStream(b, 2) {
		t.Fatal("stream limit not kept")
	}
	ss.CloseStream(b)
	if !ss.OpenStream(b, 2) {
		t.Fatal("closed stream still counted")
	}
	if _, ok := ss.Get("", now); ok {
		t.Fatal("empty id matched")
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
