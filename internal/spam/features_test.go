package spam

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// Crafted messages for the features that generalize: each must show up
// as its rule and as its classifier token, and an ordinary message must
// show neither.

func hasToken(raw string, tok string) bool {
	return slices.Contains(Tokens([]byte(raw), nil), tok)
}

func TestOriginRelay(t *testing.T) {
	ip := netip.MustParseAddr("198.51.100.23")
	for _, tc := range []struct {
		name, received  string
		rdns, helo      string
		dynamic, forged bool
	}{
		{"postfix", "from mail.example.org (mail.example.org [198.51.100.23]) by mx.example.com", "mail.example.org", "mail.example.org", false, false},
		{"postfix no rdns", "from mail.example.org (unknown [198.51.100.23]) by mx.example.com", "", "mail.example.org", false, false},
		{"sendmail no rdns", "from HOME-PC ([198.51.100.23]) by mx.example.com", "", "home-pc", false, false},
		{"sendmail forged", "from example.org (23.100.51.198.dsl.isp.example [198.51.100.23]) (may be forged) by mx", "23.100.51.198.dsl.isp.example", "example.org", true, true},
		{"pool name", "from x (host-198-51-100-23.isp.example [198.51.100.23]) by mx", "host-198-51-100-23.isp.example", "x", true, false},
		{"qmail", "from unknown (HELO friend) (198.51.100.23) by mx.example.com", "", "friend", false, false},
		{"exim", "from smtp.example.net ([198.51.100.23] helo=smtp.example.net) by mx", "smtp.example.net", "smtp.example.net", false, false},
		{"exim no rdns", "from [198.51.100.23] (helo=[198.51.100.23]) by mx", "", "198.51.100.23", false, false},
	} {
		o := parseRelay(tc.received, ip)
		if o.rdns != tc.rdns || o.helo != tc.helo || o.dynamic != tc.dynamic || o.forged != tc.forged {
			t.Errorf("%s: rdns %q helo %q dynamic %v forged %v; want %q %q %v %v", tc.name, o.rdns, o.helo, o.dynamic, o.forged, tc.rdns, tc.helo, tc.dynamic, tc.forged)
		}
	}
	// The originating relay is the oldest trace field with a public
	// address; the recipient's own servers (private, loopback) are not.
	o := findOrigin([]string{
		"from localhost (localhost [127.0.0.1]) by store.example.com",
		"from mx.example.com (mx.example.com [203.0.113.5]) by inner.example.com",
		"from pc (unknown [198.51.100.23]) by mx.example.com",
	})
	if o.ip != ip || o.rdns != "" || o.net24 != "198.51.100.0" {
		t.Errorf("origin %+v", o)
	}
	spam := "Received: from pc (unknown [198.51.100.23]) by mx.example.com; Mon, 2 Jan 2006 15:04:05 +0000\r\n" + goodHeader[strings.Index(goodHeader, "From:"):] + "\r\nhello\r\n"
	if h := ruleHits(t, spam, Input{}); !slices.Contains(h, "RCVD_NO_RDNS") {
		t.Errorf("no reverse name: hits %v", h)
	}
	for _, tok := range []string{"rdns:none", "helo:nodot", "rip:198.51.100.0"} {
		if !hasToken(spam, tok) {
			t.Errorf("token %s missing from %v", tok, Tokens([]byte(spam), nil))
		}
	}
	dyn := strings.Replace(spam, "pc (unknown [", "pc (198-51-100-23.dyn.isp.example [", 1)
	if h := ruleHits(t, dyn, Input{}); !slices.Contains(h, "RCVD_DYNAMIC") || slices.Contains(h, "RCVD_NO_RDNS") {
		t.Errorf("pool address: hits %v", h)
	}
	if !hasToken(dyn, "rdns:dynamic") {
		t.Error("rdns:dynamic missing")
	}
	good := strings.Replace(spam, "pc (unknown [", "mail.example.org (mail.example.org [", 1)
	if h := ruleHits(t, good, Input{}); len(h) != 0 {
		t.Errorf("a named relay hit %v", h)
	}
	if !hasToken(good, "rdns:example.org") {
		t.Error("rdns:example.org missing")
	}
}

func TestInvisibleCharacters(t *testing.T) {
	zw := "\u200b"
	body := "G" + zw + "et y" + zw + "our fr" + zw + "ee v" + zw + "ia" + zw + "gra n" + zw + "ow, che" + zw + "ap ph" + zw + "ar" + zw + "ma" + zw + "cy\r\n"
	raw := goodHeader + "Content-Type: text/plain; charset=utf-8\r\n\r\n" + body
	if h := ruleHits(t, raw, Input{}); !slices.Contains(h, "TEXT_INVISIBLE") {
		t.Errorf("hits %v", h)
	}
	toks := Tokens([]byte(raw), nil)
	for _, want := range []string{"free", "viagra", "pharmacy", "meta:invisible-chars"} {
		if !slices.Contains(toks, want) {
			t.Errorf("token %q missing: the tokenizer must read through invisible characters; got %v", want, toks)
		}
	}
	one := goodHeader + "Content-Type: text/plain; charset=utf-8\r\n\r\nsee you" + zw + " at noon\r\n"
	if h := ruleHits(t, one, Input{}); len(h) != 0 {
		t.Errorf("one stray zero-width space hit %v", h)
	}
}

func TestMixedScriptAndScripts(t *testing.T) {
	// "pаypal" and "аccount" with a Cyrillic а (U+0430).
	raw := goodHeader + "Content-Type: text/plain; charset=utf-8\r\n\r\nYour p\u0430ypal \u0430ccount is locked\r\n"
	if h := ruleHits(t, raw, Input{}); !slices.Contains(h, "TEXT_MIXED_SCRIPT") {
		t.Errorf("hits %v", h)
	}
	if !hasToken(raw, "meta:mixed-script-words") {
		t.Error("meta:mixed-script-words missing")
	}
	// Russian text is one script, not a mix, and gives script:cyrillic.
	ru := goodHeader + "Content-Type: text/plain; charset=utf-8\r\n\r\n" +
		"Уважаемый клиент, предлагаем вам лучшие цены на рекламу в интернете\r\n"
	if h := ruleHits(t, ru, Input{}); slices.Contains(h, "TEXT_MIXED_SCRIPT") {
		t.Errorf("Russian text hit %v", h)
	}
	if !hasToken(ru, "script:cyrillic") {
		t.Errorf("script:cyrillic missing: %v", Tokens([]byte(ru), nil))
	}
	zh := goodHeader + "Content-Type: text/plain; charset=utf-8\r\n\r\n" + "我们公司提供最优惠的价格和最好的服务欢迎来电咨询谢谢合作祝您生意兴隆\r\n"
	if !hasToken(zh, "script:cjk") {
		t.Error("script:cjk missing")
	}
	if hasToken(goodHeader+"\r\nSee you at noon, and bring the slides.\r\n", "script:cyrillic") {
		t.Error("English text has a script token")
	}
}

func TestUndeclared8bit(t *testing.T) {
	raw := goodHeader + "MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n\xc7\xeb\xc1\xaa\xcf\xb5\xce\xd2\xc3\xc7\r\n"
	if h := ruleHits(t, raw, Input{}); !slices.Contains(h, "CHARSET_UNDECLARED_8BIT") {
		t.Errorf("hits %v", h)
	}
	declared := strings.Replace(raw, "text/plain", "text/plain; charset=gb2312", 1)
	if h := ruleHits(t, declared, Input{}); slices.Contains(h, "CHARSET_UNDECLARED_8BIT") {
		t.Errorf("declared charset hit %v", h)
	}
}

func TestURLFeatures(t *testing.T) {
	raw := goodHeader + "\r\nyour parcel: https://bit.ly/3xYz and http://www.mybank.example@203.0.113.9/login and http://shop.example.co.uk/a\r\n"
	h := ruleHits(t, raw, Input{})
	for _, want := range []string{"URL_SHORTENER", "URL_USERINFO"} {
		if !slices.Contains(h, want) {
			t.Errorf("%s not hit: %v", want, h)
		}
	}
	for _, tok := range []string{"url:shortener", "url:userinfo", "tld:co.uk", "url:example.co.uk", "url:ip"} {
		if !hasToken(raw, tok) {
			t.Errorf("token %s missing: %v", tok, Tokens([]byte(raw), nil))
		}
	}
	if h := ruleHits(t, goodHeader+"\r\nthe slides: https://files.example.org/talk.pdf\r\n", Input{}); len(h) != 0 {
		t.Errorf("an ordinary link hit %v", h)
	}
}
