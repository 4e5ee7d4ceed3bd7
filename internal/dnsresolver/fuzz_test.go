package dnsresolver

import (
	"testing"

	"github.com/miekg/dns"
)

// FuzzParseAnswer: any reply that unpacks is read without panic, and the
// records returned are of the asked type.
func FuzzParseAnswer(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("a.test.", dns.TypeA)
	m.Response = true
	m.Answer = append(m.Answer,
		&dns.CNAME{Hdr: dns.RR_Header{Name: "a.test.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: "b.test."},
		&dns.A{Hdr: dns.RR_Header{Name: "b.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 9}, A: []byte{192, 0, 2, 1}})
	m.Ns = append(m.Ns, &dns.SOA{Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60}, Ns: "ns.test.", Mbox: "h.test.", Minttl: 30})
	b, _ := m.Pack()
	f.Add(b, uint16(dns.TypeA))
	f.Fuzz(func(t *testing.T, b []byte, qtype uint16) {
		r := new(dns.Msg)
		if r.Unpack(b) != nil {
			return
		}
		rrs, res := parseAnswer(r, "a.test.", qtype)
		for _, rr := range rrs {
			if rr.Header().Rrtype != qtype {
				t.Fatalf("record of type %d for a query of type %d", rr.Header().Rrtype, qtype)
			}
		}
		if res.TTL < 0 {
			t.Fatalf("negative TTL %v", res.TTL)
		}
	})
}
