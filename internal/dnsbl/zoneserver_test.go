package dnsbl

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestZoneServerPerAddress(t *testing.T) {
	zs, res := startZone(t, ZoneConfig{Name: "bl.test", TTL: 10 * time.Minute, NegativeTTL: 90 * time.Second},
		"192.0.2.7", "198.51.100.0/24", "2001:db8::/64", "2001:db8:1::9")
	ctx := context.Background()

	a, r, err := res.LookupA(ctx, ipName(netip.MustParseAddr("192.0.2.7"), zs.Name()))
	if err != nil || len(a) != 1 || a[0].IP != netip.MustParseAddr("127.0.0.2") || r.TTL != 10*time.Minute {
		t.Fatalf("listed A: %v %+v %v", a, r, err)
	}
	txt, _, err := res.LookupTXT(ctx, "7.2.0.192.BL.test")
	if err != nil || len(txt) != 1 || txt[0].Text != "Listed by bl.test" {
		t.Fatalf("listed TXT: %v %v", txt, err)
	}
	// RFC 5782 §2.1: not listed is NXDOMAIN; the SOA gives the negative TTL.
	a, r, err = res.LookupA(ctx, "8.2.0.192.bl.test")
	if err != nil || len(a) != 0 || !r.NXDomain || r.TTL != 90*time.Second {
		t.Fatalf("unlisted: %v %+v %v", a, r, err)
	}
	// A listed name asked for another type: NODATA.
	if mx, r, err := res.LookupMX(ctx, "7.2.0.192.bl.test"); err != nil || len(mx) != 0 || r.NXDomain {
		t.Fatalf("NODATA: %v %+v %v", mx, r, err)
	}
	for ip, want := range map[string]bool{
		"198.51.100.0": true, "198.51.100.255": true, "198.51.101.0": false,
		"127.0.0.2": true, "127.0.0.1": false, // RFC 5782 §5
		"2001:db8::1234": true, "2001:db8:0:1::1": false, "2001:db8:1::9": true, "::ffff:127.0.0.2": true,
	} {
		addr := netip.MustParseAddr(ip)
		name := ipName(addr, zs.Name())
		if addr.Is4In6() {
			name = nibbleName(addr) + zs.Name()
		}
		a, _, err := res.LookupA(ctx, name)
		if err != nil || (len(a) == 1) != want {
			t.Errorf("%s: %v %v, want listed=%v", ip, a, err, want)
		}
	}
	// Malformed names under the zone do not exist.
	for _, name := range []string{"1.2.3.bl.test", "01.2.0.192.bl.test", "x.bl.test"} {
		if _, r, err := res.LookupA(ctx, name); err != nil || !r.NXDomain {
			t.Errorf("%s: %+v %v, want NXDOMAIN", name, r, err)
		}
	}
}

func TestZoneServerBitmap(t *testing.T) {
	zs, res := startZone(t, ZoneConfig{Name: "bl.test"}, "10.1.2.0", "10.1.2.5", "10.1.2.127", "10.1.2.133", "10.1.3.128/25")
	ctx := context.Background()
	if zs.BitmapName() != "bitmap.bl.test" {
		t.Fatalf("BitmapName = %q", zs.BitmapName())
	}
	aaaa, r, err := res.LookupAAAA(ctx, "0.2.1.10.bitmap.bl.test")
	if err != nil || len(aaaa) != 1 || r.NXDomain {
		t.Fatalf("lower half: %v %+v %v", aaaa, r, err)
	}
	// Bits 0, 5 and 127: 0x84 0 … 0 0x01.
	if want := netip.MustParseAddr("8400::1"); aaaa[0].IP != want {
		t.Fatalf("lower half bitmap %v, want %v", aaaa[0].IP, want)
	}
	aaaa, _, err = res.LookupAAAA(ctx, "1.2.1.10.bitmap.bl.test")
	if err != nil || len(aaaa) != 1 || aaaa[0].IP != netip.MustParseAddr("0400::") { // 133 = 128+5
		t.Fatalf("upper half: %v %v", aaaa, err)
	}
	aaaa, _, err = res.LookupAAAA(ctx, "1.3.1.10.bitmap.bl.test")
	if err != nil || len(aaaa) != 1 || aaaa[0].IP != netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff") {
		t.Fatalf("listed /25: %v %v", aaaa, err)
	}
	// A /25 with nothing listed does not exist.
	if aaaa, r, err := res.LookupAAAA(ctx, "0.3.1.10.bitmap.bl.test"); err != nil || len(aaaa) != 0 || !r.NXDomain || r.TTL != DefaultZoneNegativeTTL {
		t.Fatalf("empty /25: %v %+v %v", aaaa, r, err)
	}
	// The list is replaced atomically.
	if err := zs.SetList(prefixes(t, "10.1.3.1")); err != nil {
		t.Fatal(err)
	}
	if _, r, _ := res.LookupAAAA(ctx, "0.2.1.10.bitmap.bl.test"); !r.NXDomain {
		t.Fatal("old entries still served after SetList")
	}
	if aaaa, _, _ := res.LookupAAAA(ctx, "0.3.1.10.bitmap.bl.test"); len(aaaa) != 1 || aaaa[0].IP != netip.MustParseAddr("4000::") {
		t.Fatalf("new entry: %v", aaaa)
	}
}

func TestZoneServerProtocol(t *testing.T) {
	zs, err := NewZoneServer(ZoneConfig{Name: "bl.test", NegativeTTL: 42 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(name string, qtype uint16) *dns.Msg {
		q := new(dns.Msg)
		q.SetQuestion(name, qtype)
		return zs.answer(q)
	}
	if m := ask("example.com.", dns.TypeA); m.Rcode != dns.RcodeRefused {
		t.Errorf("outside the zone: rcode %s", dns.RcodeToString[m.Rcode])
	}
	m := ask("bl.test.", dns.TypeSOA)
	if soa, ok := firstRR(m).(*dns.SOA); !ok || soa.Minttl != 42 || !m.Authoritative {
		t.Errorf("apex SOA: %v", m)
	}
	if m := ask("bitmap.bl.test.", dns.TypeNS); len(m.Answer) != 1 {
		t.Errorf("bitmap apex NS: %v", m)
	}
	if m := ask("2.0.0.127.bl.test.", dns.TypeANY); len(m.Answer) != 2 {
		t.Errorf("ANY for a listed address: %v", m)
	}
	q := new(dns.Msg)
	q.SetQuestion("bl.test.", dns.TypeSOA)
	q.Opcode = dns.OpcodeUpdate
	if m := zs.answer(q); m.Rcode != dns.RcodeNotImplemented {
		t.Errorf("UPDATE: rcode %s", dns.RcodeToString[m.Rcode])
	}
	for _, bad := range []ZoneConfig{{}, {Name: "bad..name"}, {Name: "bl.test", BitmapName: "bl.test"}} {
		if _, err := NewZoneServer(bad); err == nil {
			t.Errorf("NewZoneServer(%+v) accepted", bad)
		}
	}
}

func firstRR(m *dns.Msg) dns.RR {
	if len(m.Answer) == 0 {
		return nil
	}
	return m.Answer[0]
}
