package carddavd

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/emersion/go-vcard"
	"github.com/emersion/go-webdav"
	"github.com/emersion/go-webdav/carddav"

	"pimail/internal/auth"
	"pimail/internal/password"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

const pass = "correct horse battery"

func setup(t *testing.T) (*httptest.Server, *sqlite.Store, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet, CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.AddDomain(ctx, "example.com"); err != nil {
		t.Fatal(err)
	}
	hash, err := password.Hash(pass)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, a := range []string{"alice@example.com", "bob@example.com"} {
		acc, err := st.AddAccount(ctx, a, hash)
		if err != nil {
			t.Fatal(err)
		}
		ids[a] = acc.ID
	}
	mux := http.NewServeMux()
	h := New(st, auth.New(st, quiet), quiet)
	mux.Handle(Prefix, h)
	mux.Handle(WellKnown, h)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts, st, ids
}

func client(t *testing.T, ts *httptest.Server, user string) *carddav.Client {
	c, err := carddav.NewClient(webdav.HTTPClientWithBasicAuth(ts.Client(), user, pass), ts.URL+Prefix)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCard(uid, name, email string) vcard.Card {
	c := vcard.Card{}
	c.SetValue(vcard.FieldVersion, "3.0")
	c.SetValue(vcard.FieldUID, uid)
	c.SetValue(vcard.FieldFormattedName, name)
	c.SetName(&vcard.Name{FamilyName: name})
	c.AddValue(vcard.FieldEmail, email)
	return c
}

// raw sends a request as alice with optional headers.
func raw(t *testing.T, ts *httptest.Server, method, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	req.SetBasicAuth("alice@example.com", pass)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestCardDAV drives the server with go-webdav's CardDAV client:
// discovery, writing and reading cards (vCard 3 in, 4 stored), the
// store's view of them, conditional writes, UID conflicts, deletion and
// the boundaries between accounts.
func TestCardDAV(t *testing.T) {
	ts, st, ids := setup(t)
	ctx := context.Background()
	c := client(t, ts, "alice@example.com")
	if err := c.HasSupport(ctx); err != nil {
		t.Fatalf("no CardDAV support: %v", err)
	}
	home, err := c.FindAddressBookHomeSet(ctx, Prefix+"alice@example.com/")
	if err != nil || home != "/dav/alice@example.com/contacts/" {
		t.Fatalf("home set %q: %v", home, err)
	}
	books, err := c.FindAddressBooks(ctx, home)
	if err != nil || len(books) != 1 || books[0].Path != home+"default/" || books[0].MaxResourceSize != store.MaxContactSize {
		t.Fatalf("books %+v: %v", books, err)
	}
	book := books[0].Path
	o, err := c.PutAddressObject(ctx, book+"ann.vcf", newCard("ann-uid", "Ann Example", "ann@example.net"))
	if err != nil || o.ETag == "" {
		t.Fatalf("put: %+v, %v", o, err)
	}
	stored, err := st.Contact(ctx, ids["alice@example.com"], "ann.vcf")
	if err != nil || stored.Name != "Ann Example" || len(stored.Emails) != 1 || stored.Emails[0] != "ann@example.net" ||
		!strings.Contains(string(stored.Card), "VERSION:4.0") {
		t.Fatalf("stored: %+v, %v", stored, err)
	}
	got, err := c.GetAddressObject(ctx, book+"ann.vcf")
	if err != nil || got.Card.PreferredValue(vcard.FieldFormattedName) != "Ann Example" || got.ETag != o.ETag {
		t.Fatalf("get: %+v, %v", got, err)
	}
	all, err := c.MultiGetAddressBook(ctx, book, &carddav.AddressBookMultiGet{Paths: []string{book + "ann.vcf"}, DataRequest: carddav.AddressDataRequest{AllProp: true}})
	if err != nil || len(all) != 1 {
		t.Fatalf("multiget: %+v, %v", all, err)
	}
	q, err := c.QueryAddressBook(ctx, book, &carddav.AddressBookQuery{DataRequest: carddav.AddressDataRequest{AllProp: true},
		PropFilters: []carddav.PropFilter{{Name: vcard.FieldEmail, TextMatches: []carddav.TextMatch{{Text: "ann@"}}}}})
	if err != nil || len(q) != 1 {
		t.Fatalf("query: %+v, %v", q, err)
	}

	// Conditional writes (RFC 7232): a stale If-Match and a create over a
	// card fail with 412; the current ETag succeeds.
	card := "BEGIN:VCARD\r\nVERSION:4.0\r\nUID:ann-uid\r\nFN:Ann Changed\r\nEND:VCARD\r\n"
	vc := []string{"Content-Type", "text/vcard"}
	if r := raw(t, ts, "PUT", book+"ann.vcf", card, append(vc, "If-None-Match", "*")...); r.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("create over a card: %d", r.StatusCode)
	}
	if r := raw(t, ts, "PUT", book+"ann.vcf", card, append(vc, "If-Match", `"999"`)...); r.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("stale If-Match: %d", r.StatusCode)
	}
	r := raw(t, ts, "PUT", book+"ann.vcf", card, append(vc, "If-Match", `"`+o.ETag+`"`)...)
	if r.StatusCode != http.StatusCreated && r.StatusCode != http.StatusNoContent {
		t.Errorf("current If-Match: %d", r.StatusCode)
	}
	if etag := r.Header.Get("ETag"); etag == "" || etag == `"`+o.ETag+`"` {
		t.Errorf("ETag after the change: %q (was %q)", etag, o.ETag)
	}
	// A second card with the same UID (RFC 6352 §6.3.2.1).
	if r := raw(t, ts, "PUT", book+"other.vcf", card, vc...); r.StatusCode != http.StatusConflict {
		t.Errorf("UID conflict: %d", r.StatusCode)
	}
	if r := raw(t, ts, "PUT", book+"bad.vcf", "BEGIN:VCARD\r\nVERSION:4.0\r\nFN:no uid\r\nEND:VCARD\r\n", vc...); r.StatusCode != http.StatusConflict {
		t.Errorf("card without UID: %d", r.StatusCode)
	}
	if r := raw(t, ts, "PUT", book+"big.vcf", "BEGIN:VCARD\r\nVERSION:4.0\r\nUID:big\r\nFN:big\r\nNOTE:"+strings.Repeat("x", store.MaxContactSize)+"\r\nEND:VCARD\r\n", vc...); r.StatusCode < 400 {
		t.Errorf("card over the size limit: %d", r.StatusCode)
	}

	// Accounts are apart: bob sees no card of alice's, and cannot reach
	// her book by its path.
	bob := client(t, ts, "bob@example.com")
	if _, err := bob.GetAddressObject(ctx, book+"ann.vcf"); err == nil {
		t.Fatal("bob read alice's card")
	}
	if _, err := bob.PutAddressObject(ctx, book+"x.vcf", newCard("x", "X", "x@example.net")); err == nil {
		t.Fatal("bob wrote into alice's book")
	}
	if l, _ := st.Contacts(ctx, ids["alice@example.com"]); len(l) != 1 {
		t.Fatalf("alice's book: %d cards", len(l))
	}

	// Deletion.
	if r := raw(t, ts, "DELETE", book+"ann.vcf", ""); r.StatusCode != http.StatusNoContent && r.StatusCode != http.StatusOK {
		t.Errorf("delete: %d", r.StatusCode)
	}
	if r := raw(t, ts, "DELETE", book+"ann.vcf", ""); r.StatusCode != http.StatusNotFound {
		t.Errorf("delete again: %d", r.StatusCode)
	}
	// Books are neither made nor removed.
	if r := raw(t, ts, "MKCOL", home+"second/", ""); r.StatusCode < 400 {
		t.Errorf("MKCOL: %d", r.StatusCode)
	}
}

func TestCardDAVAuth(t *testing.T) {
	ts, _, _ := setup(t)
	resp, err := ts.Client().Get(ts.URL + Prefix)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("no credentials: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	req, _ := http.NewRequest("PROPFIND", ts.URL+Prefix, nil)
	req.SetBasicAuth("alice@example.com", "wrong password")
	resp, err = ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", resp.StatusCode)
	}
	noRedirect := *ts.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err = noRedirect.Get(ts.URL + WellKnown)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != Prefix {
		t.Fatalf("well-known: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
