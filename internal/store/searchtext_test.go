package store

import (
	"strings"
	"testing"
)

func TestHTMLText(t *testing.T) {
	cases := map[string]string{
		"<p>Hello&nbsp;<b>World</b></p>":              "\nHello\u00a0World\n",
		"<SCRIPT>x=1</SCRIPT>after":                   "after",
		"<style type=x>p{}</style>a<br/>b":            "a\nb",
		"a <!-- hidden --> b":                         "a  b",
		"unterminated <!-- comment":                   "unterminated ",
		"5 < 6 and 7 > 3":                             "5 < 6 and 7 > 3",
		"x <":                                         "x <",
		"<td>a</td><td>b</td>":                        " a b",
		"caf&eacute; &amp; &#8364;":                   "café & €",
		"<head><title>T</title></head><body>B</body>": "B",
	}
	for in, want := range cases {
		if got := HTMLText(in); got != want {
			t.Errorf("HTMLText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExtractSearchableText(t *testing.T) {
	raw := []byte("Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\nX-Long: folded\r\n value\r\n\r\nBODY Text\r\n")
	st := ExtractSearchableText(raw, nil)
	if !strings.Contains(st.Header, "subject: grüße\n") || !strings.Contains(st.Header, "x-long: folded value\n") {
		t.Errorf("header %q", st.Header)
	}
	if st.Body != "body text\r\n\n" {
		t.Errorf("body %q", st.Body)
	}
	if !HeaderFieldContains(raw, nil, "x-LONG", "D VAL") || HeaderFieldContains(raw, nil, "subject", "folded") {
		t.Errorf("HeaderFieldContains")
	}
	if !HeaderFieldContains(raw, nil, "Subject", "") || HeaderFieldContains(raw, nil, "Cc", "") {
		t.Errorf("HeaderFieldContains presence")
	}
}
