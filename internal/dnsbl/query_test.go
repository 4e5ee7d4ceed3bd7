package dnsbl

import (
	"net/netip"
	"strings"
	"testing"
)

func TestQueryNames(t *testing.T) {
	// RFC 5782 §2.1 and §2.4 examples.
	if got := ipName(netip.MustParseAddr("192.0.2.99"), "bad.example.com"); got != "99.2.0.192.bad.example.com" {
		t.Errorf("IPv4 name %q", got)
	}
	if got := ipName(netip.MustParseAddr("::ffff:192.0.2.99"), "bl"); got != "99.2.0.192.bl" {
		t.Errorf("mapped IPv4 name %q", got)
	}
	want := "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.bad.example.com"
	if got := ipName(netip.MustParseAddr("2001:db8:1:2:3:4:567:89ab"), "bad.example.com"); got != want {
		t.Errorf("IPv6 name\n got %q\nwant %q", got, want)
	}
	for ip, want := range map[string]string{"10.1.2.3": "0.2.1.10.z", "10.1.2.127": "0.2.1.10.z", "10.1.2.128": "1.2.1.10.z", "10.1.2.255": "1.2.1.10.z"} {
		if got := bitmapName(netip.MustParseAddr(ip), "z"); got != want {
			t.Errorf("bitmapName(%s) = %q, want %q", ip, got, want)
		}
	}
	if p := bitmapPrefix(netip.MustParseAddr("10.1.2.200")); p.String() != "10.1.2.128/25" {
		t.Errorf("bitmapPrefix = %v", p)
	}
	if i := bitmapIndex(netip.MustParseAddr("10.1.2.200")); i != 72 {
		t.Errorf("bitmapIndex = %d", i)
	}
}

func TestParseNamesRoundTrip(t *testing.T) {
	for _, s := range []string{"192.0.2.99", "0.0.0.0", "255.255.255.255", "2001:db8:1:2:3:4:567:89ab", "::1", "::ffff:127.0.0.2"} {
		ip := netip.MustParseAddr(s)
		name := strings.TrimSuffix(ipName(ip, "z"), ".z")
		if ip.Is4In6() { // ipName unmaps, so the mapped form must be asked in nibbles
			name = strings.TrimSuffix(nibbleName(ip), ".")
		}
		got, ok := parseIPName(name)
		if !ok || got != ip {
			t.Errorf("parseIPName(%q) = %v, %v; want %v", name, got, ok, ip)
		}
	}
	for _, bad := range []string{"1.2.3", "01.2.3.4", "256.2.3.4", "a.2.3.4", "1..3.4", "1.2.3.4.5"} {
		if _, ok := parseIPName(bad); ok {
			t.Errorf("parseIPName(%q) accepted", bad)
		}
	}
	p, ok := parseBitmapName("1.2.1.10")
	if !ok || p.String() != "10.1.2.128/25" {
		t.Errorf("parseBitmapName = %v, %v", p, ok)
	}
	for _, bad := range []string{"2.2.1.10", "0.2.1", "0.2.1.300"} {
		if _, ok := parseBitmapName(bad); ok {
			t.Errorf("parseBitmapName(%q) accepted", bad)
		}
	}
}

// nibbleName writes the nibble form of any 16-byte address, mapped ones
// included (ipName would unmap them).
func nibbleName(ip netip.Addr) string {
	const hex = "0123456789abcdef"
	a := ip.As16()
	var b strings.Builder
	for i := 15; i >= 0; i-- {
		b.WriteByte(hex[a[i]&0xf])
		b.WriteByte('.')
		b.WriteByte(hex[a[i]>>4])
		b.WriteByte('.')
	}
	return b.String()
}

func TestBitmap(t *testing.T) {
	var b Bitmap
	if !b.Empty() {
		t.Fatal("zero bitmap not empty")
	}
	b.Set(0)
	b.Set(5)
	b.Set(127)
	if b[0] != 0x84 || b[15] != 0x01 || b.Count() != 3 || !b.Has(5) || b.Has(6) || b.Empty() {
		t.Fatalf("bitmap %x", b)
	}
	b.Clear(0)
	if b.Has(0) || b[0] != 0x04 {
		t.Fatalf("clear: %x", b)
	}
	var o Bitmap
	o.Set(64)
	b.Or(o)
	if !b.Has(64) || b.Count() != 3 {
		t.Fatalf("or: %x", b)
	}
}

func TestListingCode(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.2": true, "127.0.0.10": true, "127.0.1.2": true,
		"127.0.0.1": false, "127.255.255.254": false, "127.255.255.252": false,
		"192.0.2.1": false, "::1": false, "::ffff:127.0.0.2": true,
	} {
		if got := listingCode(netip.MustParseAddr(s)); got != want {
			t.Errorf("listingCode(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList(strings.NewReader("# site list\n192.0.2.1\n\n198.51.100.0/24 # a subnet\n2001:db8::/64\n2001:db8:1::7\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"192.0.2.1/32", "198.51.100.0/24", "2001:db8::/64", "2001:db8:1::7/128"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d = %v, want %s", i, got[i], want[i])
		}
	}
	if _, err := ParseList(strings.NewReader("192.0.2.1\nnot-an-ip\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: %v", err)
	}
	if _, err := newListing([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}); err == nil {
		t.Fatal("a /8 was accepted")
	}
	l, err := newListing([]netip.Prefix{netip.MustParsePrefix("10.9.0.0/16"), netip.MustParsePrefix("127.0.0.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	if !l.has(netip.MustParseAddr("10.9.255.255")) || !l.has(netip.MustParseAddr("10.9.0.0")) || l.has(netip.MustParseAddr("10.10.0.0")) {
		t.Fatal("/16 not listed exactly")
	}
	if len(l.v4) != 512+2 {
		t.Fatalf("%d bitmaps for a /16 and 127.0.0.0/24, want 514", len(l.v4))
	}
	if l.has(netip.MustParseAddr("127.0.0.1")) || !l.has(netip.MustParseAddr("127.0.0.2")) {
		t.Fatal("RFC 5782 §5 test entries wrong")
	}
}
