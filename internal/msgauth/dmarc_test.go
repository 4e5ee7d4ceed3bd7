package msgauth

import (
	"context"
	"pimail/internal/message"
	"testing"
)

func TestDMARCEvaluate(t *testing.T) {
	z := newZone(t,
		txt("_dmarc.a.test", "v=DMARC1; p=reject; rua=mailto:d@a.test"),
		txt("_dmarc.strict.test", "v=DMARC1; p=quarantine; aspf=s; adkim=s"),
		txt("_dmarc.org.test", "v=DMARC1; p=none; sp=reject"),
		txt("_dmarc.half.test", "v=DMARC1; p=reject; pct=50"),
		txt("_dmarc.noversion.test", "p=reject"),
		txt("_dmarc.nop.test", "v=DMARC1; rua=mailto:x@nop.test"),
		txt("_dmarc.twice.test", "v=DMARC1; p=reject"),
		txt("_dmarc.twice.test", "v=DMARC1; p=none"),
		// RFC 7489 §6.6.3 (issue 22): the search stops at the first level
		// with DMARC records; an invalid p= or sp= there is no policy.
		txt("_dmarc.rej.test", "v=DMARC1; p=reject"),
		txt("_dmarc.two.rej.test", "v=DMARC1; p=none"),
		txt("_dmarc.two.rej.test", "v=DMARC1; p=quarantine"),
		txt("_dmarc.badp.rej.test", "v=DMARC1; p=bogus"),
		txt("_dmarc.badsp.test", "v=DMARC1; p=reject; sp=bogus"),
		txt("_dmarc.badsprua.test", "v=DMARC1; p=reject; sp=bogus; rua=mailto:d@badsprua.test"),
		txt("_dmarc.other.rej.test", "v=spf1 -all"),
		txt("_dmarc.case.test", "V=dmarc1; p=reject"),
		txt("_dmarc.xn--bcher-kva.example", "v=DMARC1; p=reject"),
	)
	z.failing("_dmarc.down.test")
	r := z.resolver(t)
	ctx := context.Background()
	spfPass := func(d string) SPFResult { return SPFResult{Result: "pass", Domain: d, Identity: "mailfrom"} }
	spfFail := SPFResult{Result: "fail", Domain: "evil.test"}
	dkimPass := func(d string) []DKIMResult { return []DKIMResult{{Result: "pass", Domain: d}} }
	low := func() int { return 10 }
	high := func() int { return 90 }

	cases := []struct {
		name    string
		from    string
		spf     SPFResult
		dkim    []DKIMResult
		sample  func() int
		result  string
		policy  string
		dispose string
	}{
		{"spf aligned", "a.test", spfPass("a.test"), nil, low, "pass", "reject", "none"},
		{"spf relaxed alignment", "a.test", spfPass("bounces.a.test"), nil, low, "pass", "reject", "none"},
		{"dkim aligned", "a.test", spfFail, dkimPass("a.test"), low, "pass", "reject", "none"},
		{"dkim of another domain", "a.test", spfFail, dkimPass("evil.test"), low, "fail", "reject", "reject"},
		{"spf pass not aligned", "a.test", spfPass("evil.test"), nil, low, "fail", "reject", "reject"},
		{"dkim fail", "a.test", spfFail, []DKIMResult{{Result: "fail", Domain: "a.test"}}, low, "fail", "reject", "reject"},
		{"strict spf", "strict.test", spfPass("mail.strict.test"), nil, low, "fail", "quarantine", "quarantine"},
		{"strict dkim", "strict.test", spfFail, dkimPass("mail.strict.test"), low, "fail", "quarantine", "quarantine"},
		{"strict exact", "strict.test", spfPass("strict.test"), nil, low, "pass", "quarantine", "none"},
		{"org fallback uses sp", "news.org.test", spfFail, nil, low, "fail", "reject", "reject"},
		{"org domain itself uses p", "org.test", spfFail, nil, low, "fail", "none", "none"},
		{"pct sampled in", "half.test", spfFail, nil, low, "fail", "reject", "reject"},
		{"pct sampled out", "half.test", spfFail, nil, high, "fail", "reject", "quarantine"},
		{"no record", "none.test", spfFail, nil, low, "none", "", "none"},
		{"no v tag", "noversion.test", spfFail, nil, low, "none", "", "none"},
		{"no p but rua", "nop.test", spfFail, nil, low, "fail", "none", "none"},
		{"two records", "twice.test", spfFail, nil, low, "none", "", "none"},
		{"dns down", "down.test", spfFail, nil, low, "temperror", "", "none"},
		{"two records at the subdomain, no fallback", "two.rej.test", spfFail, nil, low, "none", "", "none"},
		{"invalid p at the subdomain, no fallback", "badp.rej.test", spfFail, nil, low, "none", "", "none"},
		{"invalid sp without rua", "badsp.test", spfFail, nil, low, "none", "", "none"},
		{"invalid sp with rua: p=none", "badsprua.test", spfFail, nil, low, "fail", "none", "none"},
		{"non-DMARC TXT at the subdomain: fallback", "other.rej.test", spfFail, nil, low, "fail", "reject", "reject"},
		{"v=DMARC1 matches precisely", "case.test", spfFail, nil, low, "none", "", "none"},
		{"dkim policy result does not pass", "a.test", spfFail, []DKIMResult{{Result: "policy", Domain: "a.test"}}, low, "fail", "reject", "reject"},
		{"IDN in A-labels", "xn--bcher-kva.example", spfFail, nil, low, "fail", "reject", "reject"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := evaluateDMARC(ctx, r, c.from, c.spf, c.dkim, c.sample)
			if got.Result != c.result || got.Policy != c.policy || got.Disposition != c.dispose || got.FromDomain != c.from {
				t.Fatalf("got %+v, want result %s policy %q disposition %s", got, c.result, c.policy, c.dispose)
			}
		})
	}
}

func TestOrgDomain(t *testing.T) {
	for in, want := range map[string]string{
		"a.test":              "a.test",
		"mail.a.test":         "a.test",
		"x.y.example.co.uk":   "example.co.uk",
		"co.uk":               "co.uk",
		"Mail.Example.COM.":   "example.com",
		"bounces.example.com": "example.com",
	} {
		if got := message.OrgDomain(in); got != want {
			t.Errorf("OrgDomain(%q) = %q, want %q", in, got, want)
		}
	}
	if aligned("example.co.uk", "other.co.uk", 'r') {
		t.Error("two registrations under a public suffix are aligned")
	}
	if !aligned("a.example.com", "b.example.com", 'r') || aligned("a.example.com", "b.example.com", 's') {
		t.Error("relaxed/strict alignment")
	}
}
