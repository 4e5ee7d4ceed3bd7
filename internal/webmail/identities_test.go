package webmail

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"pimail/internal/message"
)

// TestIdentities: an alias that delivers to alice becomes an identity
// with its own signature; a reply to mail sent to the alias goes out from
// it; an address she may not use is refused, and so is an identity whose
// alias was removed.
func TestIdentities(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.st.AddAlias(ctx, "sales@example.com", []string{"alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.AddAlias(ctx, "info@example.com", []string{"bob@example.com"}); err != nil {
		t.Fatal(err)
	}
	c := f.client(t)
	c.login("alice@example.com")
	_, page := c.get("/settings")
	if !strings.Contains(page, "<option>sales@example.com</option>") || strings.Contains(page, "info@example.com") {
		t.Fatalf("new identity choices:\n%s", page)
	}
	resp, body := c.post("/settings/identity", url.Values{"id": {"0"}, "address": {"sales@example.com"}, "name": {"Alice at Sales"}, "signature": {"Sales team\nExample Inc."}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	resp, body = c.post("/settings/identity", url.Values{"id": {"0"}, "address": {"info@example.com"}, "name": {"x"}})
	expectStatus(t, resp, http.StatusBadRequest, body)
	resp, body = c.post("/settings/identity", url.Values{"id": {"0"}, "address": {"sales@example.com"}, "name": {"again"}})
	expectStatus(t, resp, http.StatusConflict, body)

	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, "From: Carol <carol@example.net>\nTo: Sales <sales@example.com>\nSubject: a quote\nMessage-ID: <q@example.net>\n\nHow much?\n")
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	_, form := c.get("/compose?mode=reply&box=" + inbox + "&uid=1")
	if !regexp.MustCompile(`<option value="sales@example.com" data-signature="-- \nSales team\nExample Inc." selected>Alice at Sales &lt;sales@example.com&gt;</option>`).MatchString(form) ||
		!strings.Contains(form, "-- \nSales team\nExample Inc.") {
		t.Fatalf("reply form does not start from the alias:\n%s", form)
	}
	resp, body = c.post("/compose", url.Values{"from": {"sales@example.com"}, "to": {"bob@example.com"}, "subject": {"Re: a quote"}, "body": {"Ten."}, "action": {"send"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	p := message.Parse([]byte(f.raw(t, "bob@example.com", "INBOX", 0)))
	if from := p.Envelope.From; len(from) != 1 || from[0].Addr() != "sales@example.com" || message.DecodeHeaderValue(from[0].Name) != "Alice at Sales" {
		t.Fatalf("From of the reply: %+v", from)
	}
	// Not an identity of hers, then an alias no longer hers.
	resp, body = c.post("/compose", url.Values{"from": {"info@example.com"}, "to": {"bob@example.com"}, "subject": {"x"}, "body": {"x"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusBadRequest, body)
	if err := f.st.RemoveAlias(ctx, "sales@example.com"); err != nil {
		t.Fatal(err)
	}
	resp, body = c.post("/compose", url.Values{"from": {"sales@example.com"}, "to": {"bob@example.com"}, "subject": {"x"}, "body": {"x"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusBadRequest, body)
	if !strings.Contains(body, "cannot send as sales@example.com") {
		t.Fatalf("refusal: %s", body)
	}
}

// TestHTMLCompose: a formatted message goes out as multipart/alternative,
// its text part first, its HTML part holding only formatting: what could
// run, load or submit is gone.
func TestHTMLCompose(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	html := `<p>Hello <b>Bob</b>, see <a href="https://example.org/x" onclick="alert(1)">this</a>.</p><ul><li>one</li></ul>` +
		`<script>alert(2)</script><img src="https://tracker.example/p.gif" onerror="alert(3)"><p style="background:url(https://evil.example/)">styled</p>` +
		`<a href="javascript:alert(4)">js</a><iframe src="https://evil.example/"></iframe>`
	resp, body := c.post("/compose", url.Values{"to": {"bob@example.com"}, "subject": {"formatted"}, "format": {"html"}, "html": {html},
		"body": {"ignored"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	raw := f.raw(t, "bob@example.com", "INBOX", 0)
	p := message.Parse([]byte(raw))
	if p.Body.Type != "multipart" || p.Body.Subtype != "alternative" || len(p.Body.Parts) != 2 ||
		p.Body.Parts[0].MIMEType() != "text/plain" || p.Body.Parts[1].MIMEType() != "text/html" {
		t.Fatalf("structure:\n%s", raw)
	}
	text, _ := message.DecodeText([]byte(raw), p.Body.Parts[0])
	got, _ := message.DecodeText([]byte(raw), p.Body.Parts[1])
	if !strings.Contains(text, "Hello Bob, see this.") || strings.Contains(text, "<") || strings.Contains(text, "ignored") {
		t.Errorf("text part: %q", text)
	}
	for _, want := range []string{"<b>Bob</b>", `href="https://example.org/x"`, "<li>one</li>", "styled"} {
		if !strings.Contains(got, want) {
			t.Errorf("HTML part lacks %q: %s", want, got)
		}
	}
	low := strings.ToLower(got)
	for _, bad := range []string{"<script", "onclick", "onerror", "<img", "tracker.example", "style=", "javascript:", "<iframe", "evil.example"} {
		if strings.Contains(low, bad) {
			t.Errorf("HTML part keeps %q: %s", bad, got)
		}
	}
	// A formatted draft opens in the editor with its (sanitized) HTML.
	resp, body = c.post("/compose", url.Values{"to": {"bob@example.com"}, "subject": {"draft"}, "format": {"html"}, "html": {html}, "action": {"save"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	_, form := c.get(resp.Header.Get("Location"))
	if !strings.Contains(form, `data-html="1"`) || !strings.Contains(form, "<b>Bob</b>") || strings.Contains(form, "<script>alert") || strings.Contains(form, "onerror") {
		t.Fatalf("draft form:\n%s", form)
	}
	// Plain text stays the default.
	_, form = c.get("/compose")
	if strings.Contains(form, `data-html="1"`) {
		t.Fatal("new messages start formatted")
	}
}

// TestSessionsList: the settings list the account's browsers; one can
// be logged out from another, and "log out everywhere" ends them all.
func TestSessionsList(t *testing.T) {
	f := newFixture(t)
	a, b, other := f.client(t), f.client(t), f.client(t)
	a.login("alice@example.com")
	b.login("alice@example.com")
	other.login("bob@example.com")
	_, page := a.get("/settings")
	keys := regexp.MustCompile(`name="key" value="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(keys) != 1 || strings.Count(page, "(this one)") != 1 || !strings.Contains(page, "A browser, 127.0.0.1") {
		t.Fatalf("sessions list:\n%s", page)
	}
	resp, body := a.post("/settings/sessions", url.Values{"key": {keys[0][1]}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	if resp, _ := b.get("/settings"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("the ended session still works: %d", resp.StatusCode)
	}
	b.login("alice@example.com")
	resp, body = a.post("/settings/sessions", url.Values{"all": {"1"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	for _, c := range []*client{a, b} {
		if resp, _ := c.get("/settings"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("logged out everywhere, yet a session works: %d", resp.StatusCode)
		}
	}
	if resp, _ := other.get("/settings"); resp.StatusCode != http.StatusOK {
		t.Fatal("bob was logged out by alice")
	}
}
