package message

import "testing"

// HasField must find every field ScanFields finds (callers skip the
// scan on its word), and stop at the end of the header.
func TestHasField(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want bool
	}{
		{"Subject: x\r\n\r\nAuthentication-Results: mx; a\r\n", false},
		{"Subject: x\r\nAUTHENTICATION-RESULTS : mx; a\r\n\r\n", true},
		{"Subject: x\n authentication-results: mx\nauthentication-results:mx\n\n", true},
		{"Subject: Authentication-Results: mx\r\n\r\n", false},
		{"X-Authentication-Results: mx\r\n\r\n", false},
		{"Authentication-Resultsx: mx\r\n\r\n", false},
		{"From MAILER-DAEMON\r\nAuthentication-Results: mx\r\n", true},
	} {
		got := HasField([]byte(c.raw), "Authentication-Results")
		scanned := false
		ScanFields([]byte(c.raw), func(f RawField) bool {
			scanned = scanned || f.Is("Authentication-Results")
			return true
		})
		if got != c.want || got != scanned {
			t.Errorf("HasField(%q) = %v, want %v (ScanFields finds one: %v)", c.raw, got, c.want, scanned)
		}
	}
}

// TestAuthors: every From field and address, read by the one parser;
// issue 22's bypasses (a comment inside the domain, many fields, many
// addresses) all come out with the victim's domain.
func TestAuthors(t *testing.T) {
	filler := ""
	for range 1500 {
		filler += "X-Filler: x\r\n"
	}
	for name, c := range map[string]struct {
		raw      string
		hosts    []string
		complete bool
	}{
		"comment in domain": {"From: CEO <ceo@(x)victim.test>\r\n\r\n", []string{"victim.test"}, true},
		"after filler":      {filler + "From: CEO <ceo@victim.test>\r\n\r\n", []string{"victim.test"}, true},
		"two fields":        {"From: a@one.test\r\nSubject: s\r\nFrom: b@victim.test\r\n\r\n", []string{"one.test", "victim.test"}, true},
		"group":             {"From: team: a@one.test, b@two.test;\r\n\r\n", []string{"one.test", "two.test"}, true},
		"no from":           {"Subject: s\r\n\r\n", nil, true},
	} {
		list, complete := Authors([]byte(c.raw))
		var hosts []string
		for _, a := range list {
			hosts = append(hosts, a.Host)
		}
		if complete != c.complete || len(hosts) != len(c.hosts) {
			t.Errorf("%s: %v %v, want %v", name, hosts, complete, c.hosts)
			continue
		}
		for i := range hosts {
			if hosts[i] != c.hosts[i] {
				t.Errorf("%s: %v, want %v", name, hosts, c.hosts)
			}
		}
	}
	many := "From: "
	for i := range maxAddresses + 1 {
		if i > 0 {
			many += ", "
		}
		many += "a@x.test"
	}
	if _, complete := Authors([]byte(many + "\r\n\r\n")); complete {
		t.Error("a From field cut at maxAddresses reported complete")
	}
}

func TestASCIIDomain(t *testing.T) {
	for in, want := range map[string]string{
		"bücher.example":        "xn--bcher-kva.example",
		"BÜCHER.Example.":       "xn--bcher-kva.example",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
		"Mail.Example.COM":      "mail.example.com",
		"_dmarc.example.com":    "_dmarc.example.com",
		"例え.テスト":                "xn--r8jz45g.xn--zckzah",
		"a..b":                  "",
		"-a.example":            "",
		"a b.example":           "",
		"[192.0.2.1]":           "",
		"xn--zz.example":        "",
		"":                      "",
	} {
		got, ok := ASCIIDomain(in)
		if got != want || ok != (want != "") {
			t.Errorf("ASCIIDomain(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if u := UnicodeDomain("xn--bcher-kva.example"); u != "bücher.example" {
		t.Errorf("UnicodeDomain = %q", u)
	}
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain subject":         "plain subject",
		"invoice\u202Efdp.exe":  "invoice[U+202E]fdp.exe",
		"a\x1b[31mred\x07":      "a[U+001B][31mred[U+0007]",
		"line\u2028break":       "line[U+2028]break",
		"tab\there":             "tab here",
		"cr\r\nlf":              "cr[U+000D][U+000A]lf",
		"zero\u200bwidth\ufeff": "zero[U+200B]width[U+FEFF]",
		"Grüße 👨‍👩‍👧":           "Grüße 👨‍👩‍👧",
		"c1\u0085":              "c1[U+0085]",
		"isolate\u2067x\u2069":  "isolate[U+2067]x[U+2069]",
		"bad\xffutf8":           "bad\uFFFDutf8",
		"arabic mark\u061c":     "arabic mark[U+061C]",
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}
