package spam

import (
	"strings"
)

// URL features that outlast the hosts themselves: spammers change
// domains by the week, but not the kind of domain (the top-level domains
// that are cheap to register), the redirectors that hide the target, or
// the tricks that make a link read as another (user information before
// the host, RFC 3986 §3.2.1, as in http://bank.example@203.0.113.9/).

// shorteners are public URL-shortening services: the link's real target
// is not in the message.
var shorteners = map[string]bool{
	"bit.ly": true, "tinyurl.com": true, "goo.gl": true, "ow.ly": true, "t.co": true,
	"is.gd": true, "buff.ly": true, "tiny.cc": true, "rebrand.ly": true, "cutt.ly": true,
	"shorturl.at": true, "rb.gy": true, "x.co": true, "lnkd.in": true, "s.id": true,
	"v.gd": true, "clck.ru": true, "t.ly": true, "bitly.com": true, "snip.ly": true,
}

// hasUserinfo reports a URL whose authority holds an "@": what is shown
// before it is not the host the link goes to.
func hasUserinfo(u string) bool {
	s := u
	if i := strings.Index(s, "//"); i >= 0 {
		s = s[i+2:]
	} else {
		return false
	}
	if k := strings.IndexAny(s, "/?#\\"); k >= 0 {
		s = s[:k]
	}
	return strings.IndexByte(s, '@') > 0
}

// urlTokens adds the features of one link (host h of URL u).
func (t *tokenSet) urlTokens(u, h string) {
	if isIPHost(h) {
		t.add("url:ip")
	} else {
		t.add2("url:", h)
		r := registrable(h)
		t.add2("url:", r)
		if i := strings.IndexByte(r, '.'); i > 0 && i < len(r)-1 {
			// The suffix the domain was registered under ("com",
			// "co.uk"), as registrable approximates it.
			t.add2("tld:", r[i+1:])
		}
		if shorteners[r] || shorteners[h] {
			t.add("url:shortener")
		}
	}
	if hasUserinfo(u) {
		t.add("url:userinfo")
	}
	t.urlPath(u)
}

func ruleURLShortener(c *ruleCtx) bool {
	for _, h := range c.a.hosts {
		if h != "" && (shorteners[h] || shorteners[registrable(h)]) {
			return true
		}
	}
	return false
}

func ruleURLUserinfo(c *ruleCtx) bool {
	for i, h := range c.a.hosts {
		if h != "" && hasUserinfo(c.a.urls[i]) {
			return true
		}
	}
	return false
}
