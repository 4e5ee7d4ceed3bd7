package dnscheck

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"pimail/internal/dkim"
	"pimail/internal/dnscheck/zonetest"
	"pimail/internal/dnsresolver"
	"pimail/internal/store"
)

const (
	domain = "example.org"
	host   = "mail.example.org"
)

var serverIP = netip.MustParseAddr("127.0.0.1")

func dkimRecords(t *testing.T) []dkim.Record {
	t.Helper()
	var out []dkim.Record
	for _, alg := range []string{store.DKIMRSA, store.DKIMEd25519} {
		k, err := dkim.NewKey(domain, alg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		r, err := dkim.PublicRecord(k)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// zone renders Expected as zone text plus the PTR of the server's address.
func zone(p Params) string {
	var b strings.Builder
	for _, r := range Expected(p) {
		if r.Note != "" {
			b.WriteString("; " + r.Note + "\n")
		}
		b.WriteString(r.ZoneLine() + "\n")
	}
	for _, n := range PTRNames(p.Addrs) {
		b.WriteString(n + ". 3600 IN PTR " + p.Hostname + ".\n")
	}
	return b.String()
}

type fixture struct {
	srv     *zonetest.Server
	checker Checker
}

func setup(t *testing.T) *fixture {
	t.Helper()
	keys := dkimRecords(t)
	p := Params{Domain: domain, Hostname: host, DKIM: keys, Addrs: []netip.Addr{serverIP}}
	srv, err := zonetest.Start(zone(p))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	l, err := NewLookuper(dnsresolver.Config{Servers: []string{srv.Addr}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, checker: Checker{Lookup: l, Domain: domain, Hostname: host, DKIM: keys}}
}

func (f *fixture) run(t *testing.T) []Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.checker.Run(ctx)
}

func find(t *testing.T, rs []Result, check, name string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Check == check && (name == "" || r.Name == name) {
			return r
		}
	}
	t.Fatalf("no %s check for %q in:\n%s", check, name, render(rs))
	return Result{}
}

func render(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.String() + "\n")
	}
	return b.String()
}

func TestExpectedZonePasses(t *testing.T) {
	f := setup(t)
	rs := f.run(t)
	if n := Failed(rs); n != 0 {
		t.Fatalf("%d checks failed against the expected zone:\n%s", n, render(rs))
	}
	// MX, A, PTR, SPF, 2 DKIM, DMARC, MTA-STS, its host, TLS-RPT, 2 names, 6 SRV.
	if len(rs) != 18 {
		t.Errorf("%d checks, want 18:\n%s", len(rs), render(rs))
	}
	if r := find(t, rs, "SPF", domain); !strings.Contains(r.Got, "permits 127.0.0.1") {
		t.Errorf("SPF line %q does not say it permits the server", r)
	}
}

func TestCheckReportsDifferences(t *testing.T) {
	f := setup(t)
	keys := f.checker.DKIM
	mustAdd := func(line string) {
		t.Helper()
		if err := f.srv.Add(line); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name, typ string) {
		t.Helper()
		if f.srv.Remove(name, typ) == 0 {
			t.Fatalf("no %s record at %s to remove", typ, name)
		}
	}
	remove(domain, "MX")
	mustAdd(domain + ". 60 IN MX 10 mx.other.example.")
	remove(domain, "TXT")
	mustAdd(domain + `. 60 IN TXT "v=spf1 -all"`)
	remove("_dmarc."+domain, "TXT")
	remove(keys[0].Name, "TXT")
	mustAdd(keys[0].Name + `. 60 IN TXT "v=DKIM1; k=rsa; p=AAAA"`)
	remove("_imaps._tcp."+domain, "SRV")
	mustAdd("_imaps._tcp." + domain + ". 60 IN SRV 0 1 1993 " + host + ".")
	remove("autoconfig."+domain, "CNAME")
	mustAdd("autoconfig." + domain + ". 60 IN A 127.0.0.1") // same address: fine
	remove("autodiscover."+domain, "CNAME")
	mustAdd("autodiscover." + domain + ". 60 IN CNAME elsewhere.example.")
	remove("_mta-sts."+domain, "TXT")
	mustAdd("_mta-sts." + domain + `. 60 IN TXT "v=STSv1; id=not-valid!"`)
	remove("1.0.0.127.in-addr.arpa", "PTR")

	rs := f.run(t)
	selector := func(k dkim.Record) string { return "DKIM " + strings.Split(k.Name, ".")[0] }
	want := map[string]Status{
		"MX":              Wrong,
		"SPF":             Wrong,
		"DMARC":           Missing,
		selector(keys[0]): Wrong,
		selector(keys[1]): OK,
		"autoconfig":      OK,
		"autodiscover":    Wrong,
		"MTA-STS":         Wrong,
		"PTR":             Missing,
	}
	for check, st := range want {
		if r := find(t, rs, check, ""); r.Status != st {
			t.Errorf("%s: %s, want %s", check, r, st)
		}
	}
	if r := find(t, rs, "SRV", "_imaps._tcp."+domain); r.Status != Wrong || !strings.Contains(r.Got, "1993") {
		t.Errorf("SRV with the wrong port: %s", r)
	}
	if r := find(t, rs, "SPF", ""); !strings.Contains(r.Got, `"fail" for 127.0.0.1`) {
		t.Errorf("SPF that does not permit the server: %s", r)
	}
	if r := find(t, rs, "MX", ""); !strings.Contains(r.String(), "got 10 mx.other.example; want 10 "+host+".") {
		t.Errorf("MX line does not say what is there and what is expected: %s", r)
	}
	if n := Failed(rs); n != 8 {
		t.Errorf("%d checks failed, want 8:\n%s", n, render(rs))
	}
}

func TestMissingDomain(t *testing.T) {
	f := setup(t)
	f.checker.Domain = "absent.example"
	rs := f.run(t)
	for _, r := range rs {
		if r.Name == host || r.Check == "PTR" || strings.HasPrefix(r.Check, "DKIM") {
			continue // the server's own records are still there
		}
		if r.Status == OK {
			t.Errorf("check of a domain with no records passed: %s", r)
		}
	}
}

func TestLookupFailureIsReported(t *testing.T) {
	l, err := NewLookuper(dnsresolver.Config{Servers: []string{"127.0.0.1:1"}, Timeout: 200 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := Checker{Lookup: l, Domain: domain, Hostname: host}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := c.checkMX(ctx, domain, host)
	if r.Status != Wrong || !strings.Contains(r.Got, "no answer") {
		t.Errorf("MX check without a DNS server: %s", r)
	}
}

func TestZoneLineSplitsLongTXT(t *testing.T) {
	r := Record{Name: "x.example", Type: "TXT", Value: strings.Repeat("a", 300) + `"q"`}
	got := r.ZoneLine()
	rrs, err := zonetest.Parse(got)
	if err != nil || len(rrs) != 1 {
		t.Fatalf("zone line %q does not parse: %v", got, err)
	}
	if !strings.Contains(got, `( "`) || !strings.Contains(got, `\"q\"`) {
		t.Errorf("zone line %q: want two quoted strings in parentheses with escaped quotes", got)
	}
}
