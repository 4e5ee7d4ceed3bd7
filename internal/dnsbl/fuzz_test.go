package dnsbl

import (
	"testing"

	"github.com/miekg/dns"
)

// FuzzZoneServer: any query the network can deliver gets an answer that
// packs, and names that parse as addresses round-trip.
func FuzzZoneServer(f *testing.F) {
	zs, err := NewZoneServer(ZoneConfig{Name: "bl.test"})
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"2.0.0.127.bl.test.", "0.2.1.10.bitmap.bl.test.", "bl.test.", "x.y.bl.test.", "example.com."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeSOA} {
			q := new(dns.Msg)
			q.SetQuestion(name, qt)
			b, _ := q.Pack()
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q := new(dns.Msg)
		if q.Unpack(b) != nil {
			return
		}
		r := zs.answer(q)
		if _, err := r.Pack(); err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, r)
		}
		if len(q.Question) == 1 {
			name := q.Question[0].Name
			if ip, ok := parseIPName(name); ok && ip.Is4() && ipName(ip, "") != name+"." {
				t.Fatalf("parseIPName(%q) = %v does not round-trip", name, ip)
			}
		}
	})
}
