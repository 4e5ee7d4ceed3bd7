package msgauth

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

func spfChecker(t *testing.T, r Resolver) *Checker {
	t.Helper()
	c, err := New(Config{Resolver: r, AuthservID: "mx.b.test", CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSPFResults(t *testing.T) {
	z := newZone(t,
		txt("pass.test", "v=spf1 ip4:192.0.2.0/24 -all"),
		txt("mx.test", "v=spf1 mx -all"),
		"mx.test. 300 IN MX 10 mail.mx.test.",
		"mail.mx.test. 300 IN A 192.0.2.25",
		txt("soft.test", "v=spf1 ip4:198.51.100.1 ~all"),
		txt("neutral.test", "v=spf1 ?all"),
		txt("other.test", "some verification token"),
		txt("broken.test", "v=spf1 ip4:not-an-ip -all"),
		txt("two.test", "v=spf1 -all"),
		txt("two.test", "v=spf1 +all"),
		txt("helo.test", "v=spf1 a -all"),
		"helo.test. 300 IN A 192.0.2.7",
		txt("deadinclude.test", "v=spf1 include:broken-dns.test -all"),
	)
	z.failing("servfail.test")
	z.failing("broken-dns.test")
	r := z.resolver(t)
	ip := netip.MustParseAddr("192.0.2.7")
	cases := []struct {
		name, helo, from, want string
	}{
		{"ip4 match", "x.test", "a@pass.test", "pass"},
		{"mx match", "x.test", "a@mx.test", "fail"}, // MX host is .25, client .7
		{"softfail", "x.test", "a@soft.test", "softfail"},
		{"neutral", "x.test", "a@neutral.test", "neutral"},
		{"no spf record", "x.test", "a@other.test", "none"},
		{"nxdomain", "x.test", "a@nowhere.test", "none"},
		{"invalid record", "x.test", "a@broken.test", "permerror"},
		{"two records", "x.test", "a@two.test", "permerror"}, // RFC 7208 §4.5
		{"servfail", "x.test", "a@servfail.test", "temperror"},
		{"include servfail", "x.test", "a@deadinclude.test", "temperror"},
		{"null sender uses helo", "helo.test", "", "pass"},
		{"address literal helo", "[192.0.2.7]", "", "none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := spfChecker(t, r).checkSPF(context.Background(), ip, c.helo, c.from)
			if got.Result != c.want {
				t.Fatalf("spf %q helo %q = %+v, want %s", c.from, c.helo, got, c.want)
			}
		})
	}
	got := spfChecker(t, r).checkSPF(context.Background(), netip.MustParseAddr("192.0.2.25"), "x.test", "a@mx.test")
	if got.Result != "pass" || got.Domain != "mx.test" || got.Identity != "mailfrom" {
		t.Fatalf("mx pass: %+v", got)
	}
	got = spfChecker(t, r).checkSPF(context.Background(), ip, "helo.test", "")
	if got.Domain != "helo.test" || got.Identity != "helo" {
		t.Fatalf("null sender identity: %+v", got)
	}
}

// RFC 7208 §4.6.4: at most 10 terms causing DNS lookups, then permerror;
// and at most 2 void lookups.
func TestSPFLookupLimits(t *testing.T) {
	var recs []string
	// chain.test includes c1 … c11, each including the next.
	recs = append(recs, txt("chain.test", "v=spf1 include:c1.test -all"))
	for i := 1; i <= 11; i++ {
		recs = append(recs, txt(fmt.Sprintf("c%d.test", i), fmt.Sprintf("v=spf1 include:c%d.test -all", i+1)))
	}
	recs = append(recs, txt("c12.test", "v=spf1 +all"))
	recs = append(recs, txt("void.test", "v=spf1 a:v1.test a:v2.test a:v3.test -all"))
	z := newZone(t, recs...)
	r := z.resolver(t)
	ip := netip.MustParseAddr("192.0.2.7")
	if got := spfChecker(t, r).checkSPF(context.Background(), ip, "x.test", "a@chain.test"); got.Result != "permerror" {
		t.Fatalf("11 includes: %+v", got)
	}
	if n := z.count("c11.test", dns.TypeTXT); n != 0 {
		t.Fatalf("the 11th include was looked up (%d queries)", n)
	}
	if got := spfChecker(t, r).checkSPF(context.Background(), ip, "x.test", "a@void.test"); got.Result != "permerror" {
		t.Fatalf("3 void lookups: %+v", got)
	}
}
