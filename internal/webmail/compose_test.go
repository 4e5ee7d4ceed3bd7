package webmail

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pimail/internal/message"
	"pimail/internal/store"
)

// postMultipart sends the compose form with files (name → content).
func (c *client) postMultipart(path string, vals url.Values, files map[string]string) (*http.Response, string) {
	c.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if vals.Get("csrf") == "" {
		vals.Set("csrf", c.csrf)
	}
	for k, vs := range vals {
		for _, v := range vs {
			_ = mw.WriteField(k, v)
		}
	}
	for name, content := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="files"; filename="`+strings.ReplaceAll(name, `"`, "%22")+`"`)
		h.Set("Content-Type", "text/plain")
		w, _ := mw.CreatePart(h)
		_, _ = w.Write([]byte(content))
	}
	mw.Close()
	req, _ := http.NewRequest("POST", c.f.ts.URL+path, &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return c.do(req)
}

func TestSendLocalWithAttachment(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	resp, body := c.postMultipart("/compose", url.Values{"to": {"Bob <bob@example.com>"}, "bcc": {"alice@example.com"},
		"subject": {"Grüße"}, "body": {"Hello Bob\nline two"}, "action": {"send"}}, map[string]string{"notes.txt": "attached text"})
	expectStatus(t, resp, http.StatusSeeOther, body)
	raw := f.raw(t, "bob@example.com", "INBOX", 0)
	p := message.Parse([]byte(raw))
	if p.Subject != "Grüße" || hasHeader(raw, "Bcc") {
		t.Fatalf("delivered: subject %q, bcc leaked=%v\n%s", p.Subject, hasHeader(raw, "Bcc"), raw)
	}
	atts := attachments(p.Body)
	if len(atts) != 1 || atts[0].Name != "notes.txt" {
		t.Fatalf("attachments: %+v", atts)
	}
	if txt := messageText([]byte(raw), p.Body); !strings.Contains(txt, "Hello Bob\r\nline two") {
		t.Fatalf("body: %q", txt)
	}
	sent := f.raw(t, "alice@example.com", "Sent", 0)
	if !hasHeader(sent, "Bcc") || hasHeader(sent, "Received") {
		t.Fatalf("Sent copy should keep Bcc and no Received:\n%s", sent)
	}
	// Bcc to self delivered too.
	if len(f.metas(t, "alice@example.com", "INBOX")) != 1 {
		t.Fatal("bcc recipient did not receive")
	}
}

func TestSendRemoteFailsClearly(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	resp, body := c.post("/compose", url.Values{"to": {"bob@example.com, someone@elsewhere.test"}, "subject": {"x"}, "body": {"y"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusBadRequest, body)
	if !strings.Contains(body, "Sending to other domains is not available on this server: someone@elsewhere.test") {
		t.Fatalf("no clear error:\n%s", body)
	}
	if !strings.Contains(body, `value="bob@example.com, someone@elsewhere.test"`) {
		t.Fatal("form values not kept")
	}
	if len(f.metas(t, "bob@example.com", "INBOX")) != 0 || len(f.metas(t, "alice@example.com", "Sent")) != 0 {
		t.Fatal("partial send happened")
	}
	resp, body = c.post("/compose", url.Values{"to": {"nobody@example.com"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusBadRequest, body)
	if !strings.Contains(body, "No such recipient here: nobody@example.com") {
		t.Fatal("unknown local recipient not reported")
	}
}

func TestReplyAllAndForward(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com", "bob@example.com"},
		"From: Bob <bob@example.com>\nTo: alice@example.com, \"Doe, Jane\" <jane@example.com>\nCc: alice@example.com\nSubject: plan\nMessage-ID: <orig@example.com>\nReferences: <root@example.com>\nContent-Type: multipart/mixed; boundary=X\n\n--X\nContent-Type: text/plain\n\nthe plan\n--X\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename=plan.bin\n\nDATA\n--X--\n")
	c := f.client(t)
	c.login("alice@example.com")
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	_, body := c.get("/compose?mode=all&box=" + inbox + "&uid=1")
	for _, want := range []string{`name="to" id="to" value="Bob &lt;bob@example.com&gt;"`, `&#34;Doe, Jane&#34; &lt;jane@example.com&gt;`,
		`value="Re: plan"`, `name="in_reply_to" value="&lt;orig@example.com&gt;"`, `&lt;root@example.com&gt; &lt;orig@example.com&gt;`, "&gt; the plan"} {
		if !strings.Contains(body, want) {
			t.Fatalf("reply-all form lacks %q:\n%s", want, body)
		}
	}
	if m := regexp.MustCompile(`name="(?:to|cc)" id="(?:to|cc)" value="([^"]*)"`).FindAllStringSubmatch(body, -1); len(m) != 2 ||
		strings.Contains(m[0][1]+m[1][1], "alice@") {
		t.Errorf("own address in reply-all recipients: %q", m)
	}
	// Send the reply (only to bob, since jane is unknown here).
	resp, body := c.post("/compose", url.Values{"to": {"bob@example.com"}, "subject": {"Re: plan"}, "body": {"ok"},
		"in_reply_to": {"<orig@example.com>"}, "references": {"<root@example.com> <orig@example.com>"},
		"mode": {"reply"}, "src_box": {inbox}, "src_uid": {"1"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	raw := f.raw(t, "bob@example.com", "INBOX", 1)
	if !strings.Contains(raw, "In-Reply-To: <orig@example.com>\r\n") || !strings.Contains(raw, "References: <root@example.com> <orig@example.com>\r\n") {
		t.Fatalf("threading headers:\n%s", raw)
	}
	if m := f.metas(t, "alice@example.com", "INBOX"); m[0].Flags&store.FlagAnswered == 0 {
		t.Fatal("original not marked answered")
	}
	// Forward keeps the attachment.
	_, body = c.get("/compose?mode=forward&box=" + inbox + "&uid=1")
	if !strings.Contains(body, `value="Fwd: plan"`) || !strings.Contains(body, `name="keep" value="2" checked`) {
		t.Fatalf("forward form:\n%s", body)
	}
	resp, body = c.post("/compose", url.Values{"to": {"bob@example.com"}, "subject": {"Fwd: plan"}, "body": {"fyi"},
		"mode": {"forward"}, "src_box": {inbox}, "src_uid": {"1"}, "keep": {"2"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	fw := message.Parse([]byte(f.raw(t, "bob@example.com", "INBOX", 2)))
	if a := attachments(fw.Body); len(a) != 1 || a[0].Name != "plan.bin" {
		t.Fatalf("forwarded attachments: %+v", a)
	}
	if m := f.metas(t, "alice@example.com", "INBOX"); !slices.Contains(m[0].Keywords, "$Forwarded") {
		t.Fatal("original not marked forwarded")
	}
}

func TestDrafts(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	resp, body := c.post("/compose", url.Values{"to": {"bob@example.com"}, "bcc": {"alice@example.com"}, "subject": {"draft one"}, "body": {"unfinished"}, "action": {"save"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	d := f.metas(t, "alice@example.com", "Drafts")
	if len(d) != 1 || d[0].Flags&store.FlagDraft == 0 {
		t.Fatalf("draft not saved: %+v", d)
	}
	resp, body = c.get(resp.Header.Get("Location"))
	if !strings.Contains(body, `value="draft one"`) || !strings.Contains(body, "unfinished") || !strings.Contains(body, `name="bcc" id="bcc" value="alice@example.com"`) ||
		!strings.Contains(body, "Draft saved") {
		t.Fatalf("draft not reopened:\n%s", body)
	}
	// Saving again replaces; sending removes it.
	resp, _ = c.post("/compose", url.Values{"to": {"bob@example.com"}, "subject": {"draft two"}, "body": {"x"}, "draft_uid": {itoa(int64(d[0].UID))}, "action": {"save"}})
	expectStatus(t, resp, http.StatusSeeOther, "")
	d = f.metas(t, "alice@example.com", "Drafts")
	if len(d) != 1 || d[0].Parsed.Subject != "draft two" {
		t.Fatalf("draft not replaced: %d", len(d))
	}
	resp, _ = c.post("/compose", url.Values{"to": {"bob@example.com"}, "subject": {"draft two"}, "body": {"x"}, "draft_uid": {itoa(int64(d[0].UID))}, "action": {"send"}})
	expectStatus(t, resp, http.StatusSeeOther, "")
	if len(f.metas(t, "alice@example.com", "Drafts")) != 0 || len(f.metas(t, "bob@example.com", "INBOX")) != 1 {
		t.Fatal("sending a draft did not deliver and remove it")
	}
}

func TestSuggest(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, simpleMail)
	c := f.client(t)
	c.login("alice@example.com")
	req, _ := http.NewRequest("GET", f.ts.URL+"/suggest?q=caro", nil)
	req.Header.Set("X-Requested-With", "fetch")
	resp, body := c.do(req)
	expectStatus(t, resp, http.StatusOK, body)
	if strings.TrimSpace(body) != `[{"label":"Carol Sender \u003ccarol@example.net\u003e","value":"Carol Sender \u003ccarol@example.net\u003e"}]` {
		t.Fatalf("suggestions: %s", body)
	}
}
