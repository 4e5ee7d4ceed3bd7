package dnsbl

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"
)

// BitmapBits is how many addresses one bitmap answer covers: an IPv4 /25.
const BitmapBits = 128

// BitmapPrefixLen is the prefix length a bitmap answer covers.
const BitmapPrefixLen = 25

// ipName is the RFC 5782 query name for ip under zone: for IPv4 the four
// octets in reverse order (§2.1: 192.0.2.99 → 99.2.0.192.<zone>); for IPv6
// the 32 nibbles of the address in reverse order (§2.4).
func ipName(ip netip.Addr, zone string) string {
	ip = ip.Unmap()
	var b strings.Builder
	if ip.Is4() {
		a := ip.As4()
		b.Grow(16 + len(zone))
		for i := 3; i >= 0; i-- {
			b.WriteString(strconv.Itoa(int(a[i])))
			b.WriteByte('.')
		}
	} else {
		const hex = "0123456789abcdef"
		a := ip.As16()
		b.Grow(64 + len(zone))
		for i := 15; i >= 0; i-- {
			b.WriteByte(hex[a[i]&0xf])
			b.WriteByte('.')
			b.WriteByte(hex[a[i]>>4])
			b.WriteByte('.')
		}
	}
	b.WriteString(zone)
	return b.String()
}

// bitmapName is the query name of the /25 holding the IPv4 address ip in
// the bitmap form: "<h>.<c>.<b>.<a>.<zone>" for a.b.c.d, h = d/128 (the
// lower or upper half of the /24).
func bitmapName(ip netip.Addr, zone string) string {
	a := ip.Unmap().As4()
	return strconv.Itoa(int(a[3]>>7)) + "." + strconv.Itoa(int(a[2])) + "." +
		strconv.Itoa(int(a[1])) + "." + strconv.Itoa(int(a[0])) + "." + zone
}

// bitmapPrefix is the /25 that holds the IPv4 address ip.
func bitmapPrefix(ip netip.Addr) netip.Prefix {
	p, _ := ip.Unmap().Prefix(BitmapPrefixLen)
	return p
}

// bitmapIndex is ip's bit in its /25's bitmap: the host part, 0–127.
func bitmapIndex(ip netip.Addr) int {
	return int(ip.Unmap().As4()[3] & 0x7f)
}

// Bitmap is the listing state of the 128 addresses of an IPv4 /25: bit i,
// counted from the most significant bit of the first octet, is set when
// the address with host part i is listed. On the wire it is the 16 octets
// of one AAAA record (see the package documentation).
type Bitmap [16]byte

// Has reports whether host i (0–127) is listed.
func (b *Bitmap) Has(i int) bool {
	return b[i>>3]&(0x80>>(i&7)) != 0
}

// Set marks host i (0–127) as listed.
func (b *Bitmap) Set(i int) { b[i>>3] |= 0x80 >> (i & 7) }

// Clear marks host i (0–127) as not listed.
func (b *Bitmap) Clear(i int) { b[i>>3] &^= 0x80 >> (i & 7) }

// Empty reports whether no host is listed.
func (b *Bitmap) Empty() bool {
	return binary.BigEndian.Uint64(b[:8]) == 0 && binary.BigEndian.Uint64(b[8:]) == 0
}

// Or adds the hosts listed in o.
func (b *Bitmap) Or(o Bitmap) {
	for i := range b {
		b[i] |= o[i]
	}
}

// Count returns how many hosts are listed.
func (b *Bitmap) Count() int {
	n := 0
	for i := 0; i < BitmapBits; i++ {
		if b.Has(i) {
			n++
		}
	}
	return n
}

// listingCode reports whether an A record from an RFC 5782 zone means
// "listed". §2.1: list entries are A records in 127.0.0.0/8; §5: 127.0.0.1
// is never an entry. 127.255.255.0/24 is what some large lists answer to
// refused or malformed queries (for instance through a public resolver);
// it is an error code, not a listing. Anything outside 127/8 is a
// wildcarding or hijacking resolver, not the list.
func listingCode(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.Is4() {
		return false
	}
	a := ip.As4()
	if a[0] != 127 || ip == netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
		return false
	}
	return !(a[1] == 255 && a[2] == 255)
}
