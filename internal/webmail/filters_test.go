package webmail

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"pimail/internal/auth"
	"pimail/internal/delivery"
	"pimail/internal/sieve"
)

// filtersFixture is the webmail fixture with the filter pages on and a
// pipeline that runs the scripts.
func filtersFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.ts.Close()
	f.pipe.WithSieve(delivery.SieveConfig{Store: f.st})
	f.srv = New(Config{Hostname: "mail.example.com", Sieve: f.st, MaxScriptSize: 4096}, f.st, auth.New(f.st, quiet()), f.pipe, quiet())
	f.ts = httptest.NewServer(f.srv)
	t.Cleanup(f.ts.Close)
	return f
}

func TestFiltersFormWritesSieve(t *testing.T) {
	f := filtersFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	resp, body := c.get("/settings/filters")
	expectStatus(t, resp, http.StatusOK, body)
	form := url.Values{
		"field":            {"from", "subject", "from"},
		"contains":         {"boss@example.net", "urgent", ""},
		"action":           {"move", "flag", "move"},
		"target":           {"Archive", "", ""},
		"forward":          {"bob@example.com"},
		"keep_copy":        {"1"},
		"vacation":         {"1"},
		"vacation_subject": {"Away"},
		"vacation_text":    {"I am away.\r\nBack \"soon\"."},
		"vacation_start":   {"2000-01-01"},
		"vacation_end":     {"2999-12-31"},
	}
	resp, body = c.post("/settings/filters", form)
	expectStatus(t, resp, http.StatusSeeOther, body)
	ctx := context.Background()
	act, err := f.st.ActiveSieveScript(ctx, f.ids["alice@example.com"])
	if err != nil || act.Name != filtersScript {
		t.Fatalf("active script %+v, %v", act, err)
	}
	if _, err := sieve.Parse(act.Content); err != nil {
		t.Fatalf("generated script does not parse: %v\n%s", err, act.Content)
	}
	for _, want := range []string{`redirect :copy "bob@example.com";`, `fileinto "Archive";`, `addflag "\\Flagged";`,
		`currentdate :value "ge" "date" "2000-01-01"`, `vacation :days 7 :subject "Away" "I am away.` + "\n" + `Back \"soon\"."`} {
		if !strings.Contains(act.Content, want) {
			t.Errorf("script lacks %s:\n%s", want, act.Content)
		}
	}
	// The form reads its settings back.
	resp, body = c.get("/settings/filters")
	expectStatus(t, resp, http.StatusOK, body)
	for _, want := range []string{`value="boss@example.net"`, `value="bob@example.com"`, "I am away.", `value="2999-12-31"`} {
		if !strings.Contains(body, want) {
			t.Errorf("form lacks %s", want)
		}
	}
	// Mail from the boss: moved to Archive, and forwarded to bob (a local
	// redirect, with a copy kept).
	f.deliver(t, "boss@example.net", []string{"alice@example.com"},
		"From: Boss <boss@example.net>\nTo: alice@example.com\nSubject: report\nMessage-ID: <b1@example.net>\n\nDo it.\n")
	if n := len(f.metas(t, "alice@example.com", "Archive")); n != 1 {
		t.Errorf("Archive has %d messages", n)
	}
	if n := len(f.metas(t, "bob@example.com", "INBOX")); n != 1 {
		t.Errorf("bob got %d forwarded messages", n)
	}
	// Invalid input: a clear error, nothing changed.
	form.Set("forward", "not an address")
	resp, body = c.post("/settings/filters", form)
	expectStatus(t, resp, http.StatusBadRequest, body)
	if !strings.Contains(body, "is not an email address") {
		t.Errorf("no error for a bad address: %s", body)
	}
	form.Set("forward", "")
	form["target"] = []string{"No such folder", "", ""}
	resp, body = c.post("/settings/filters", form)
	expectStatus(t, resp, http.StatusBadRequest, body)
	if !strings.Contains(body, "choose a folder") {
		t.Errorf("no error for a missing folder")
	}
}

func TestSieveEditor(t *testing.T) {
	f := filtersFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	resp, body := c.get("/settings/sieve")
	expectStatus(t, resp, http.StatusOK, body)
	// An error shows its place; what was typed stays in the text area,
	// escaped; nothing is stored.
	bad := "require \"fileinto\";\nif header :contains \"subject\" \"<script>alert(1)</script>\" {\n  filein \"x\";\n}\n"
	resp, body = c.post("/settings/sieve", url.Values{"name": {"mine"}, "content": {bad}, "active": {"1"}, "op": {"save"}})
	expectStatus(t, resp, http.StatusBadRequest, body)
	if !strings.Contains(body, "line 3, column 3") || strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)") {
		t.Errorf("editor error page:\n%s", body)
	}
	if _, err := f.st.SieveScript(context.Background(), f.ids["alice@example.com"], "mine"); err == nil {
		t.Error("a broken script was stored")
	}
	good := "require \"fileinto\";\nif header :contains \"subject\" \"x\" {\n  fileinto \"Archive\";\n}\n"
	resp, body = c.post("/settings/sieve", url.Values{"name": {"mine"}, "content": {good}, "active": {"1"}, "op": {"save"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	if act, err := f.st.ActiveSieveScript(context.Background(), f.ids["alice@example.com"]); err != nil || act.Name != "mine" || act.Content != good {
		t.Fatalf("active after save: %+v, %v", act, err)
	}
	// The simple form warns that another script is active.
	resp, body = c.get("/settings/filters")
	expectStatus(t, resp, http.StatusOK, body)
	if !strings.Contains(body, "Your active filter script is “mine”") {
		t.Errorf("no warning about the hand-written script")
	}
	resp, body = c.post("/settings/sieve", url.Values{"name": {"mine"}, "op": {"delete"}})
	expectStatus(t, resp, http.StatusBadRequest, body)
	resp, body = c.post("/settings/sieve", url.Values{"op": {"deactivate"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	resp, body = c.post("/settings/sieve", url.Values{"name": {"mine"}, "op": {"delete"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	if list, _ := f.st.SieveScripts(context.Background(), f.ids["alice@example.com"]); len(list) != 0 {
		t.Errorf("scripts after delete: %+v", list)
	}
	// Bob sees none of alice's scripts.
	b := f.client(t)
	b.login("bob@example.com")
	if _, body := b.get("/settings/sieve?name=mine"); strings.Contains(body, "fileinto") {
		t.Error("bob sees alice's script")
	}
}
