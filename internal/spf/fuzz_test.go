package spf

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

// FuzzCheck evaluates arbitrary records (and senders, for the macros) at
// a zone where every name answers with the record: check_host must end
// with one of the seven results, within the lookup limits, never panic.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"v=spf1 -all", "v=spf1 a:%{l}.x.test mx/24//64 ptr exists:%{ir}.%{v}._spf.%{d2} include:x.test redirect=%{o}",
		"v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 exp=%{p}.x.test ?all", "v=spf1 a:%{S}%%%_%-.test", "v=spf1 %{"} {
		f.Add(s, "o'brien@x.test")
	}
	f.Fuzz(func(t *testing.T, record, sender string) {
		h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			q := r.Question[0]
			switch q.Qtype {
			case dns.TypeTXT:
				m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{record}})
			case dns.TypeA:
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: []byte{192, 0, 2, 1}})
			case dns.TypePTR:
				m.Answer = append(m.Answer, &dns.PTR{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 60}, Ptr: "x.test."})
			}
			_ = w.WriteMsg(m)
		})
		r, err := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1"}, Transport: dnsresolver.HandlerTransport{Handler: h}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		o := Check(ctx, r, Request{IP: netip.MustParseAddr("192.0.2.1"), Sender: sender, Helo: "h.test"})
		switch o.Result {
		case None, Neutral, Pass, Fail, Softfail, Temperror, Permerror:
		default:
			t.Fatalf("result %q", o.Result)
		}
	})
}
