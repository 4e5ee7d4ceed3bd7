package webmail

import (
	"html/template"
	"strings"
	"testing"
)

func TestFirstAddr(t *testing.T) {
	for _, c := range []struct{ in, label, addr string }{
		{"a@b.example", "a@b.example", "a@b.example"},
		{"a@b.example, Carol <c@d.example>", "a@b.example", "a@b.example"},
		{"Jörg Müller <j@m.example>, x@y.example", "Jörg Müller", "j@m.example"},
		{"Doe, Jane <jane@example.com>, Bob <b@example.com>", "Doe, Jane", "jane@example.com"},
		{"Team: a@b.example, c@d.example;", "a@b.example", "a@b.example"},
		{"Team: Ann <a@b.example>;", "Ann", "a@b.example"},
		{"undisclosed-recipients: ;", ";", ""},
		{"", "", ""},
	} {
		label, addr := firstAddr(c.in)
		if label != c.label || addr != c.addr {
			t.Errorf("firstAddr(%q) = %q, %q; want %q, %q", c.in, label, addr, c.label, c.addr)
		}
	}
}

// TestGoRenderedHTMLEscapes checks the hand-written renderers against
// html/template's escaping of the same hostile strings.
func TestGoRenderedHTMLEscapes(t *testing.T) {
	hostile := `"><script>alert(1)</script>&'` + "\x00"
	if got, want := string(escapeHTML(nil, hostile)), template.HTMLEscapeString(hostile); got != want {
		t.Errorf("escapeHTML = %q, want %q", got, want)
	}
	d := listData{Rows: []row{{Box: 1, UID: 2, Who: hostile, WhoAddr: hostile, Subject: hostile, Date: hostile, FullDate: hostile, Size: hostile}}}
	v := view{Folders: []folder{{ID: 1, Name: hostile, Label: hostile}}, Current: 1}
	r := readData{Text: []segment{{Text: hostile}, {Text: "x", URL: `javascript:alert(1)`}, {Text: hostile, URL: `https://e.example/"><b>`}, {Text: hostile, Quote: true}}}
	for name, out := range map[string]template.HTML{"rows": d.RowsHTML(), "nav": v.NavHTML(), "move": v.MoveHTML(), "text": r.TextHTML()} {
		s := string(out)
		for _, bad := range []string{"<script", "javascript:", "\x00", "<b>"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s: output contains %q:\n%s", name, bad, s)
			}
		}
	}
	if !strings.Contains(string(r.TextHTML()), `<a href="https://e.example/&#34;&gt;&lt;b&gt;"`) {
		t.Errorf("link not kept escaped: %s", r.TextHTML())
	}
}
