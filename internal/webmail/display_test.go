package webmail

import (
	"html"
	"net/http"
	"strings"
	"testing"
)

// TestEveryPartShown: multipart/mixed with a text part and two inline
// HTML parts shows all three, in order, in both views, and lists the
// inline image that is neither (issue 22: only the first HTML part was
// shown; the others were neither shown nor listed).
func TestEveryPartShown(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, "From: carol@example.net\nSubject: parts\n"+
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=MM\n\n"+
		"--MM\nContent-Type: text/plain\n\nFirst, the plain text.\n"+
		"--MM\nContent-Type: text/html\nContent-Disposition: inline\n\n<p>Second, <b>HTML one</b>.</p>\n"+
		"--MM\nContent-Type: text/html\n\n<p>Third, HTML two.</p>\n"+
		"--MM\nContent-Type: multipart/alternative; boundary=AA\n\n--AA\nContent-Type: text/plain\n\nFourth, plain form.\n--AA\nContent-Type: text/html\n\n<p>Fourth, html form.</p>\n--AA--\n"+
		"--MM\nContent-Type: image/png\nContent-Disposition: inline\nContent-Transfer-Encoding: base64\n\niVBORw0KGgo=\n"+
		"--MM--\n")
	c := f.client(t)
	c.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")
	base := "/msg/" + itoa(inbox.ID) + "/1"

	resp, body := c.get(base + "?view=text")
	expectStatus(t, resp, http.StatusOK, body)
	order(t, "text view", body, "First, the plain text.", "Second, HTML one.", "Third, HTML two.", "Fourth, plain form.")
	if strings.Contains(body, "Fourth, html form") {
		t.Error("text view shows both forms of an alternative")
	}
	if !strings.Contains(body, `id="attachments"`) || !strings.Contains(body, "image/png") {
		t.Errorf("the inline image is not listed:\n%s", body)
	}

	resp, body = c.get(base + "/body")
	expectStatus(t, resp, http.StatusOK, body)
	order(t, "formatted view", body, "First, the plain text.", "<b>HTML one</b>", "Third, HTML two.", "Fourth, html form.")
	if strings.Contains(body, "Fourth, plain form") {
		t.Error("formatted view shows both forms of an alternative")
	}
}

func order(t *testing.T, what, body string, parts ...string) {
	t.Helper()
	last := -1
	for _, p := range parts {
		i := strings.Index(body, p)
		if i < 0 || i < last {
			t.Errorf("%s: %q missing or out of order:\n%s", what, p, body)
			return
		}
		last = i
	}
}

// TestUTF16WithBOM: a UTF-16 text part with a byte-order mark reads as
// text, not mojibake (issue 22).
func TestUTF16WithBOM(t *testing.T) {
	f := newFixture(t)
	// "Grüße aus Köln" in UTF-16LE with BOM, base64.
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, "From: carol@example.net\nSubject: utf16\n"+
		"Content-Type: text/plain; charset=utf-16\nContent-Transfer-Encoding: base64\n\n"+
		"//5HAHIA/ADfAGUAIABhAHUAcwAgAEsA9gBsAG4A\n")
	c := f.client(t)
	c.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")
	resp, body := c.get("/msg/" + itoa(inbox.ID) + "/1")
	expectStatus(t, resp, http.StatusOK, body)
	if !strings.Contains(body, "Grüße aus Köln") {
		t.Errorf("UTF-16 body not decoded:\n%s", body)
	}
}

// TestControlCharactersMarked: control and bidi characters in a subject,
// a display name and a file name are shown marked, never raw, in the
// list, the message page and its title, and the reply form (issue 22:
// invoice\u202Efdp.exe showed as invoiceexe.pdf).
func TestControlCharactersMarked(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"},
		"From: =?utf-8?q?Bank=E2=80=AESupport?= <carol@example.net>\nSubject: =?utf-8?q?invoice=E2=80=AEfdp.exe_=1B[31m_=E2=80=A8x?=\n"+
			"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=MM\n\n--MM\nContent-Type: text/plain\n\nsee attachment\n"+
			"--MM\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename*=utf-8''invoice%E2%80%AEfdp.exe\n\nMZ\n--MM--\n")
	c := f.client(t)
	c.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")
	for _, path := range []string{"/box/" + itoa(inbox.ID), "/msg/" + itoa(inbox.ID) + "/1", "/compose?mode=reply&box=" + itoa(inbox.ID) + "&uid=1",
		"/compose?mode=forward&box=" + itoa(inbox.ID) + "&uid=1"} {
		resp, body := c.get(path)
		expectStatus(t, resp, http.StatusOK, body)
		body = html.UnescapeString(body) // as the browser reads it
		for _, raw := range []string{"\u202e", "\x1b", "\u2028"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s: raw %q on the page", path, raw)
			}
		}
		if !strings.Contains(body, "invoice[U+202E]fdp.exe") {
			t.Errorf("%s: subject not shown marked:\n%s", path, body)
		}
		if strings.HasPrefix(path, "/msg/") {
			if !strings.Contains(body, "<title>invoice[U+202E]fdp.exe [U+001B][31m [U+2028]x") {
				t.Errorf("title not marked:\n%s", body)
			}
			if !strings.Contains(body, "Bank[U+202E]Support") {
				t.Errorf("display name not marked")
			}
		}
	}
}
