package webmail

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// FuzzSanitize feeds arbitrary HTML to the mail HTML sanitiser, with and
// without remote content allowed, and checks the output as a browser
// would parse it: only allow-listed elements, no event-handler or
// namespaced attributes, URLs only of allowed schemes (never javascript:,
// vbscript: or data: other than base64 images), src fetching nothing
// remote unless allowed, styles without url() (unless remote content is
// allowed), expression() or escapes. Seeded with the XSS corpus of
// xss_test.go.
func FuzzSanitize(f *testing.F) {
	for _, p := range xssCorpus {
		f.Add(p, false)
		f.Add(p, true)
	}
	for _, p := range []string{
		`<p style="color: red">Hi <b>there</b></p><a href="https://example.org/x">link</a>`,
		`<img src="cid:logo@x" alt="logo"><img src="cid:logo%40x"><img src="cid:&#108;ogo@x">`,
		`<a href="mailto:a@example.org">m</a><img src="data:image/png;base64,iVBORw0KGgo=">`,
		`<table><tr><td style="border: 1px solid #000; font-family: 'x'">c</td></tr></table>`,
		`<a href=" &#14;javascript:alert(1)">x</a><a href="jav&#x0A;ascript:alert(1)">y</a>`,
		`<img src="data:image/png;base64,AAAA" onerror="x"><img src=data:text/html,<script>>`,
		`<div style="width: 1px; background-color: u\72l(//e)">x</div>`,
	} {
		f.Add(p, false)
		f.Add(p, true)
	}
	z := newSanitizer()
	inline := map[string]string{"logo@x": "data:image/png;base64,iVBORw0KGgo="}
	f.Fuzz(func(t *testing.T, body string, remote bool) {
		if len(body) > 64<<10 {
			return
		}
		out := z.sanitize(body, remote, inline)
		assertInert(t, body, out, remote)
	})
}

var (
	fuzzAllowedEls = func() map[string]bool {
		m := map[string]bool{"html": true, "head": true, "body": true, "a": true, "img": true}
		for _, e := range textElements {
			m[e] = true
		}
		return m
	}()
	// dangerousURL matches a URL a browser would run or render as a
	// document, once the characters browsers strip are removed.
	dangerousURL = regexp.MustCompile(`^(javascript|vbscript|livescript|data|file|blob|filesystem):`)
	// safeDataURL: an image of a raster type, whatever its bytes, runs
	// nothing (the sanitiser also wants base64 characters, but checks
	// only the URL's opaque part, so "?" and what follows pass).
	safeDataURL  = regexp.MustCompile(`^data:image/(png|gif|jpeg|webp)[;,]`)
	fuzzBadStyle = regexp.MustCompile(`expression|javascript|vbscript|@import|behavior|-moz-binding`)
	cssEscape    = regexp.MustCompile(`\\([0-9a-f]{1,6}[ \t\n\r\f]?|[^0-9a-f])`)
	urlStyle     = regexp.MustCompile(`url\s*\(|image-set|image\s*\(`)
)

// normURL lowers a URL and drops what browsers ignore in a scheme: ASCII
// whitespace and control characters anywhere (HTML URL parsing strips
// leading C0 and space, and tab/CR/LF everywhere).
func normURL(v string) string {
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToLower(v))
}

// cssUnescape decodes CSS escapes (CSS Syntax §4.3.7): a backslash and
// one to six hex digits (and one white space after them), or a backslash
// and any other character.
func cssUnescape(v string) string {
	return cssEscape.ReplaceAllStringFunc(v, func(m string) string {
		h := strings.TrimRight(m[1:], " \t\n\r\f")
		if n, err := strconv.ParseUint(h, 16, 32); err == nil && len(h) > 0 && isHex(h) {
			if n == 0 || n > 0x10ffff || (n >= 0xd800 && n <= 0xdfff) {
				return "\uFFFD"
			}
			return string(rune(n))
		}
		return m[1:]
	})
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// assertInert fails when out, the sanitiser's answer to in, holds anything
// that can run script, submit, navigate the frame or (unless remote)
// fetch.
func assertInert(t *testing.T, in, out string, remote bool) {
	t.Helper()
	low := strings.ToLower(out)
	for _, s := range []string{"<script", "<iframe", "<object", "<embed", "<form", "<meta", "<base", "<link", "<style", "<svg", "<math", "<frame", "<applet", "<template"} {
		if strings.Contains(low, s) {
			t.Fatalf("output contains %q\ninput:  %q\noutput: %q", s, in, out)
		}
	}
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		// Only nesting deeper than the parser's limit; the string checks
		// above still held.
		return
	}
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		if depth > 10_000 {
			return
		}
		switch n.Type {
		case html.ElementNode:
			if n.Namespace != "" || !fuzzAllowedEls[n.Data] {
				t.Fatalf("element <%s> (namespace %q) in output\ninput:  %q\noutput: %q", n.Data, n.Namespace, in, out)
			}
			for _, a := range n.Attr {
				checkAttr(t, in, out, n.Data, a, remote)
			}
		case html.CommentNode:
			// Conditional comments ran script in old IE.
			if strings.Contains(strings.ToLower(n.Data), "[if") {
				t.Fatalf("conditional comment in output\ninput:  %q\noutput: %q", in, out)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, depth+1)
		}
	}
	walk(doc, 0)
}

func checkAttr(t *testing.T, in, out, el string, a html.Attribute, remote bool) {
	t.Helper()
	k := strings.ToLower(a.Key)
	v := normURL(a.Val)
	fail := func(why string) {
		t.Fatalf("<%s %s=%q>: %s\ninput:  %q\noutput: %q", el, a.Key, a.Val, why, in, out)
	}
	switch {
	case a.Namespace != "":
		fail("namespaced attribute")
	case strings.HasPrefix(k, "on"):
		fail("event handler")
	case k == "formaction" || k == "action" || k == "srcdoc" || k == "srcset" || k == "background" ||
		k == "poster" || k == "ping" || k == "xmlns" || k == "http-equiv" || k == "dynsrc" || k == "lowsrc":
		fail("attribute that fetches, submits or navigates")
	case k == "href":
		if dangerousURL.MatchString(v) && !safeDataURL.MatchString(v) {
			fail("dangerous link")
		}
	case k == "src":
		switch {
		case v == "":
		case safeDataURL.MatchString(v):
		case remote && (strings.HasPrefix(v, "https:") || strings.HasPrefix(v, "http:")):
		default:
			fail("src that fetches (remote content not allowed) or runs")
		}
	case k == "style":
		// CSS escapes (\75 rl) are judged by what they decode to: an
		// escaped name is the same token to a browser's CSS parser.
		css := normURL(cssUnescape(strings.ToLower(a.Val)))
		if fuzzBadStyle.MatchString(css) {
			fail("style that runs")
		}
		if !remote && urlStyle.MatchString(css) {
			fail("style that fetches")
		}
	case k == "target":
		if a.Val != "_blank" {
			fail("target other than _blank")
		}
	}
}

func TestCSSUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`\75 rl(x)`:         "url(x)",
		`\000075rl(`:        "url(",
		`u\rl(`:             "url(",
		`\65 xpression(1)`:  "expression(1)",
		`font-family: A\70`: "font-family: Ap",
		`\0`:                "\uFFFD",
		`a\\b`:              `a\b`,
	} {
		if got := cssUnescape(in); got != want {
			t.Errorf("cssUnescape(%q) = %q, want %q", in, got, want)
		}
	}
}
