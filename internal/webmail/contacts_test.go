package webmail

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// postFile sends a multipart form with one file field.
func (c *client) postFile(path, field, name string, data []byte) (*http.Response, string) {
	c.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("csrf", c.csrf)
	fw, _ := mw.CreateFormFile(field, name)
	fw.Write(data)
	mw.Close()
	req, _ := http.NewRequest("POST", c.f.ts.URL+path, &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return c.do(req)
}

func (c *client) suggest(q string) []suggestion {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.f.ts.URL+"/suggest?q="+url.QueryEscape(q), nil)
	req.Header.Set("X-Requested-With", "fetch")
	resp, body := c.do(req)
	expectStatus(c.t, resp, http.StatusOK, body)
	var out []suggestion
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		c.t.Fatalf("suggest %q: %v: %s", q, err, body)
	}
	return out
}

// TestContacts: a card made in the form, edited, refused when changed
// elsewhere meanwhile, added from a message, imported from vCard 3 and
// exported as vCard 4, offered with its group by the completion, and
// deleted.
func TestContacts(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, simpleMail)
	c := f.client(t)
	c.login("alice@example.com")
	acct := f.ids["alice@example.com"]
	ctx := context.Background()

	resp, body := c.post("/contacts/save", url.Values{"name": {"Dora Diaz"}, "emails": {"dora@example.org\nd.diaz@example.net"},
		"phones": {"+1 555 0100"}, "groups": {"Friends, Climbing"}, "note": {"met at the gym\nTuesdays"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	cs, _ := f.st.Contacts(ctx, acct)
	if len(cs) != 1 || cs[0].Name != "Dora Diaz" || strings.Join(cs[0].Emails, ",") != "dora@example.org,d.diaz@example.net" ||
		strings.Join(cs[0].Groups, ",") != "Friends,Climbing" || !strings.Contains(string(cs[0].Card), "VERSION:4.0") ||
		!strings.Contains(string(cs[0].Card), "NOTE:met at the gym\\nTuesdays") {
		t.Fatalf("stored card: %+v\n%s", cs, cs[0].Card)
	}
	dora := cs[0]
	// Edit; an edit from a stale form is refused, not lost.
	edit := url.Values{"href": {dora.Href}, "version": {itoa(dora.Version)}, "name": {"Dora D. Diaz"}, "emails": {"dora@example.org"}, "groups": {"Friends"}}
	resp, body = c.post("/contacts/save", edit)
	expectStatus(t, resp, http.StatusSeeOther, body)
	resp, body = c.post("/contacts/save", edit)
	expectStatus(t, resp, http.StatusConflict, body)
	if got, _ := f.st.Contact(ctx, acct, dora.Href); got.Name != "Dora D. Diaz" || len(got.Emails) != 1 || got.UID != dora.UID {
		t.Fatalf("after edit: %+v", got)
	}
	resp, body = c.post("/contacts/save", url.Values{"name": {"x"}, "emails": {"not an address"}})
	expectStatus(t, resp, http.StatusBadRequest, body)

	// From a message: the sender, once.
	box := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	resp, body = c.post("/contacts/add", url.Values{"box": {box}, "uid": {"1"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	if !strings.Contains(resp.Header.Get("Location"), "notice=added") {
		t.Fatalf("add: %s", resp.Header.Get("Location"))
	}
	resp, _ = c.post("/contacts/add", url.Values{"box": {box}, "uid": {"1"}})
	if !strings.Contains(resp.Header.Get("Location"), "notice=known") {
		t.Fatalf("add again: %s", resp.Header.Get("Location"))
	}

	// Import vCard 3 (one new card, one that replaces Dora by UID, one
	// without a UID); export all as vCard 4.
	vcf := "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:erin-1\r\nFN:Erin Example\r\nN:Example;Erin;;;\r\nEMAIL;TYPE=INTERNET,PREF:erin@example.com\r\nCATEGORIES:Friends\r\nEND:VCARD\r\n" +
		"BEGIN:VCARD\r\nVERSION:3.0\r\nUID:" + dora.UID + "\r\nFN:Dora from the phone\r\nEMAIL:dora@example.org\r\nEND:VCARD\r\n" +
		"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:No Uid\r\nEMAIL:nouid@example.com\r\nEND:VCARD\r\n"
	resp, body = c.postFile("/contacts/import", "file", "cards.vcf", []byte(vcf))
	expectStatus(t, resp, http.StatusSeeOther, body)
	if loc := resp.Header.Get("Location"); !strings.Contains(loc, "n=2") || !strings.Contains(loc, "u=1") {
		t.Fatalf("import: %s", loc)
	}
	cs, _ = f.st.Contacts(ctx, acct)
	if len(cs) != 4 {
		t.Fatalf("after import: %d cards", len(cs))
	}
	resp, body = c.postFile("/contacts/import", "file", "bad.vcf", []byte("hello"))
	expectStatus(t, resp, http.StatusBadRequest, body)
	resp, body = c.get("/contacts/export")
	expectStatus(t, resp, http.StatusOK, body)
	if resp.Header.Get("Content-Type") != "text/vcard; charset=utf-8" || strings.Count(body, "BEGIN:VCARD") != 4 ||
		strings.Contains(body, "VERSION:3.0") || !strings.Contains(body, "FN:Erin Example") || !strings.Contains(body, "FN:Dora from the phone") {
		t.Fatalf("export: %s\n%s", resp.Header, body)
	}
	resp, body = c.get("/contacts/export?group=Friends")
	if strings.Count(body, "BEGIN:VCARD") != 1 || !strings.Contains(body, "Erin") {
		t.Fatalf("export of a group: %s", body)
	}

	// Completion: the card, its group, then correspondents.
	if s := c.suggest("erin"); len(s) != 1 || s[0].Value != "Erin Example <erin@example.com>" {
		t.Fatalf("suggest erin: %+v", s)
	}
	if s := c.suggest("friend"); len(s) != 1 || s[0].Label != "Group: Friends (1)" || s[0].Value != "Erin Example <erin@example.com>" {
		t.Fatalf("suggest group: %+v", s)
	}
	if s := c.suggest("carol"); len(s) != 1 || s[0].Value != "Carol Sender <carol@example.net>" {
		t.Fatalf("suggest a card made from a message, once: %+v", s)
	}
	_, page := c.get("/contacts?group=Friends")
	if !strings.Contains(page, "Erin Example") || strings.Contains(page, "Carol Sender") {
		t.Fatalf("group filter:\n%s", page)
	}

	// Delete.
	erin, _ := f.st.Contact(ctx, acct, "erin-1.vcf")
	resp, body = c.post("/contacts/delete", url.Values{"href": {erin.Href}, "version": {itoa(erin.Version)}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	if _, err := f.st.Contact(ctx, acct, erin.Href); err == nil {
		t.Fatal("not deleted")
	}
	// Another account sees none of it.
	if l, _ := f.st.Contacts(ctx, f.ids["bob@example.com"]); len(l) != 0 {
		t.Fatal("bob sees alice's cards")
	}
}
