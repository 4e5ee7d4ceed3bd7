package spam

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	raw := "From: \"Big Sale\" <deals@shop.example.co.uk>\r\nTo: a@b.test\r\nSubject: =?utf-8?q?Gro=C3=9Fe_Preise?=\r\n" +
		"X-Spam-Status: No, score=-5\r\nStatus: RO\r\nX-Priority: 1\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		"Cheap watches! Supercalifragilisticexpialidociousness 中文测试\r\n" +
		"--b\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
		"<html><script>var hidden=1;</script><p>Visit&nbsp;<a href=3D\"http://www.shop.example.co.uk/x\">our store</a></p></html>\r\n--b--\r\n"
	toks := Tokens([]byte(raw), nil)
	for _, want := range []string{
		"s:große", "s:preise", "fn:big", "fn:sale", "fd:shop.example.co.uk", "fd:example.co.uk",
		"cheap", "watches", "skip:s30", "中文", "文测", "visit", "store",
		"url:www.shop.example.co.uk", "url:example.co.uk", "h:x-priority", "hv:x-priority:1",
		"ct:multipart/alternative", "cs:utf-8", "cte:text:quoted-printable",
	} {
		if !slices.Contains(toks, want) {
			t.Errorf("missing token %q", want)
		}
	}
	dates := Tokens([]byte("Subject: x\r\n\r\nposted 2007-04-11, since 1997-2002; call 555-1234 in 2002\r\n"), nil)
	for _, want := range []string{"num:dddd-dd-dd", "num:dddd-dddd", "555-1234", "num:year"} {
		if !slices.Contains(dates, want) {
			t.Errorf("dates: missing token %q in %q", want, dates)
		}
	}
	for _, bad := range []string{"2007-04-11", "1997-2002", "2002"} {
		if slices.Contains(dates, bad) {
			t.Errorf("dates: token %q kept", bad)
		}
	}
	for _, bad := range []string{"hidden", "var", "h:x-spam-status", "h:status", "watches!"} {
		if slices.Contains(toks, bad) {
			t.Errorf("unexpected token %q", bad)
		}
	}
	// Distinct and bounded.
	seen := map[string]bool{}
	for _, tk := range toks {
		if seen[tk] {
			t.Fatalf("duplicate %q", tk)
		}
		seen[tk] = true
	}
	var huge strings.Builder
	huge.WriteString("Subject: x\r\n\r\n")
	for i := 0; i < 20000; i++ {
		huge.WriteString("w" + strings.Repeat("x", i%20) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + " ")
	}
	if n := len(Tokens([]byte(huge.String()), nil)); n > maxTokens {
		t.Fatalf("%d tokens, bound %d", n, maxTokens)
	}
}

func TestReduceHTML(t *testing.T) {
	d := reduceHTML(`<style>p{}</style><p>Hello <b>world</b></p><a href="http://a.test/">a.test</a><img src="http://i.test/x.gif"><form></form>`)
	if !strings.Contains(d.text, "Hello") || !strings.Contains(d.text, "world") || strings.Contains(d.text, "p{}") {
		t.Fatalf("text %q", d.text)
	}
	if len(d.links) != 1 || d.links[0].text != "a.test" || d.images != 1 || d.forms != 1 || len(d.urls) != 2 {
		t.Fatalf("doc %+v", d)
	}
}

func TestStripFieldsAndFormat(t *testing.T) {
	raw := "Received: x\r\nX-Spam-Status: No,\r\n\ttests=FAKE\r\nx-spam-score: -100\r\nSubject: s\r\n\r\nX-Spam-Status: body line stays\r\n"
	got := string(StripHeaders([]byte(raw)))
	want := "Received: x\r\nSubject: s\r\n\r\nX-Spam-Status: body line stays\r\n"
	if got != want {
		t.Fatalf("strip:\n%q\nwant\n%q", got, want)
	}
	same := []byte("A: b\r\n\r\nbody")
	if out := StripHeaders(same); &out[0] != &same[0] {
		t.Fatal("no-op strip copied")
	}
	v := Verdict{Score: 9.5, Action: Junk, Bayes: 0.99, Hits: []Hit{{"BAYES_99", 7.8}, {"URL_IP_LITERAL", 1.5}, {"HTML_ONLY", 0.7}, {"MISSING_DATE", 1.2}, {"MESSAGE_ID_MALFORMED", 1}}}
	h := FormatHeaders(v, 4)
	if !strings.HasPrefix(h, "X-Spam-Status: Yes, score=9.50") || !strings.Contains(h, "X-Spam-Score: 9.50\r\n") || !strings.Contains(h, "URL_IP_LITERAL=1.50") {
		t.Fatalf("headers %q", h)
	}
	for _, line := range strings.Split(strings.TrimSuffix(h, "\r\n"), "\r\n") {
		if len(line) > 78 {
			t.Errorf("line of %d chars: %q", len(line), line)
		}
	}
	// The formatted fields are valid header syntax: they strip cleanly.
	if out := string(StripHeaders([]byte(h + "Subject: s\r\n\r\n"))); out != "Subject: s\r\n\r\n" {
		t.Fatalf("formatted fields not strippable: %q", out)
	}
}

func TestURLHost(t *testing.T) {
	for in, want := range map[string]string{
		"http://Example.COM/path":            "example.com",
		"https://user:pw@shop.test:8080/x?y": "shop.test",
		"HTTP://www.a.test.":                 "www.a.test",
		"www.b.test/page":                    "www.b.test",
		"http://%77%77%77.c.test/":           "www.c.test",
		"http://[2001:db8::1]:80/":           "2001:db8::1",
		"http://192.0.2.7/login":             "192.0.2.7",
		"http://evil.test\\@good.test/":      "evil.test",
		"mailto:a@b.test":                    "",
		"/relative":                          "",
	} {
		if got := urlHost(in); got != want {
			t.Errorf("urlHost(%q) = %q, want %q", in, got, want)
		}
	}
	if !isIPHost("192.0.2.7") || !isIPHost("2001:db8::1") || isIPHost("cafe.test") || isIPHost("") {
		t.Error("isIPHost")
	}
	for in, want := range map[string]string{"a.b.example.co.uk": "example.co.uk", "www.example.com": "example.com", "example.com": "example.com", "localhost": "localhost"} {
		if got := registrable(in); got != want {
			t.Errorf("registrable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPlainURLs(t *testing.T) {
	text := "see HTTP://A.test/x, or www.b.test. Not wwwx or http:/bad. Then https://c.test/?q=1)"
	got := plainURLs(text, 10)
	want := []string{"HTTP://A.test/x", "www.b.test", "https://c.test/?q=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("plainURLs = %q, want %q", got, want)
	}
	// Linear in the text: a long text of near-misses is read once.
	long := strings.Repeat("what whether hhhh www ", 20000) + "http://end.test/"
	if got := plainURLs(long, 10); len(got) != 1 || got[0] != "http://end.test/" {
		t.Fatalf("long text: %q", got)
	}
}

// plainURLsByLetter is the first plainURLs: it stopped at every h and w
// of the text. TestPlainURLsAgree holds the faster one to it.
func plainURLsByLetter(text string, n int) []string {
	var out []string
	for i := 0; i < len(text) && len(out) < n; {
		j := strings.IndexAny(text[i:], "hHwW")
		if j < 0 {
			break
		}
		start := i + j
		if !urlStartAt(text[start:]) {
			i = start + 1
			continue
		}
		u, end := urlAt(text, start)
		if len(u) > 7 {
			out = append(out, u)
		}
		i = max(end, start+1)
	}
	return out
}

// urlStartAt reports whether s starts with http://, https:// or www. (any
// case): how plainURLsByLetter told a URL start.
func urlStartAt(s string) bool {
	return hasPrefixFold(s, "http://") || hasPrefixFold(s, "https://") || hasPrefixFold(s, "www.")
}

// TestPlainURLsAgree compares plainURLs with plainURLsByLetter on random
// texts made of the pieces that URL starts are made of.
func TestPlainURLsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"http", "HTTPS", "hTtPs", "www", "Www", "w", "h", "s", "://", ":/", ".", "x", " ", "\n", ")"}
	var b strings.Builder
	for range 50000 {
		b.Reset()
		for range r.IntN(20) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		text, n := b.String(), 1+r.IntN(4)
		if got, want := plainURLs(text, n), plainURLsByLetter(text, n); !slices.Equal(got, want) {
			t.Fatalf("plainURLs(%q, %d) = %q, want %q", text, n, got, want)
		}
	}
}

// TestHashSet checks the token set's table against a map: the hash 0,
// repeats, and growth well past the table's first size, twice over (the
// second time after reset, as a pooled set is reused).
func TestHashSet(t *testing.T) {
	s := hashSet{slots: make([]uint64, 8)}
	for range 2 {
		want := map[uint64]bool{}
		for i := range 20000 {
			h := uint64(i%7000) * 0x9e3779b97f4a7c15 // 0 first, then repeats from 7000 on
			if i%3 == 0 {
				h = uint64(i % 5000) // small values share their high bits
			}
			if got, isNew := s.add(h), !want[h]; got != isNew {
				t.Fatalf("add(%#x) = %v, want %v", h, got, isNew)
			}
			want[h] = true
		}
		if s.n+btoi(s.zero) != len(want) {
			t.Fatalf("set holds %d hashes, want %d", s.n+btoi(s.zero), len(want))
		}
		s.reset()
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
