package dnsbl

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// MinIPv4PrefixLen is the shortest IPv4 prefix a ZoneServer list may hold:
// a /16 is 512 bitmaps; shorter ones would cost memory out of proportion.
const MinIPv4PrefixLen = 16

// maxListLine bounds one line of a list file.
const maxListLine = 1024

// ParseList reads a blocklist file: one IPv4 or IPv6 address or CIDR
// prefix per line; blank lines and text after '#' are ignored.
func ParseList(r io.Reader) ([]netip.Prefix, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxListLine)
	var out []netip.Prefix
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		p, err := parseEntry(line)
		if err != nil {
			return nil, fmt.Errorf("dnsbl: list line %d: %w", n, err)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dnsbl: read list: %w", err)
	}
	return out, nil
}

func parseEntry(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p, nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}

// listing is a ZoneServer's list in the form its answers need: IPv4 as
// one bitmap per /25, IPv6 as exact addresses plus prefixes.
type listing struct {
	v4       map[uint32]Bitmap // key: the IPv4 address >> 7
	v6       map[netip.Addr]struct{}
	v6prefix []netip.Prefix
}

var (
	// RFC 5782 §5: a list MUST hold the test entries 127.0.0.2 and
	// ::FFFF:7F00:2, and MUST NOT hold 127.0.0.1 and ::FFFF:7F00:1.
	testEntry4 = netip.AddrFrom4([4]byte{127, 0, 0, 2})
	testEntry6 = netip.AddrFrom16(netip.AddrFrom4([4]byte{127, 0, 0, 2}).As16()) // ::ffff:127.0.0.2
	neverIP4   = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	neverIP6   = netip.AddrFrom16(neverIP4.As16())
)

// newListing builds a listing from entries, with the RFC 5782 §5 test
// entries added.
func newListing(entries []netip.Prefix) (*listing, error) {
	l := &listing{v4: map[uint32]Bitmap{}, v6: map[netip.Addr]struct{}{}}
	entries = append(entries, netip.PrefixFrom(testEntry4, 32))
	for _, p := range entries {
		if !p.IsValid() {
			return nil, fmt.Errorf("dnsbl: invalid list entry %v", p)
		}
		p = p.Masked()
		if !p.Addr().Is4() {
			if p.Bits() == 128 {
				l.v6[p.Addr()] = struct{}{}
			} else {
				l.v6prefix = append(l.v6prefix, p)
			}
			continue
		}
		if p.Bits() < MinIPv4PrefixLen {
			return nil, fmt.Errorf("dnsbl: list entry %v is wider than /%d", p, MinIPv4PrefixLen)
		}
		a := p.Addr().As4()
		first := binary.BigEndian.Uint32(a[:])
		count := uint32(1) << (32 - p.Bits())
		for ip := first; ip-first < count; {
			key := ip >> 7
			bm := l.v4[key]
			host := int(ip & 0x7f)
			n := min(count-(ip-first), uint32(BitmapBits-host))
			for i := 0; i < int(n); i++ {
				bm.Set(host + i)
			}
			l.v4[key] = bm
			ip += n
			if ip == 0 { // wrapped past 255.255.255.255
				break
			}
		}
	}
	// §5: 127.0.0.1 is never listed, whatever the list says.
	if bm, ok := l.v4[u32(neverIP4)>>7]; ok {
		bm.Clear(bitmapIndex(neverIP4))
		l.v4[u32(neverIP4)>>7] = bm
	}
	return l, nil
}

func u32(ip netip.Addr) uint32 {
	a := ip.As4()
	return binary.BigEndian.Uint32(a[:])
}

// bitmap returns the /25 bitmap for the IPv4 address ip.
func (l *listing) bitmap(ip netip.Addr) Bitmap { return l.v4[u32(ip)>>7] }

// has reports whether ip is listed.
func (l *listing) has(ip netip.Addr) bool {
	if ip.Is4() {
		bm := l.bitmap(ip)
		return bm.Has(bitmapIndex(ip))
	}
	if ip == testEntry6 {
		return true
	}
	if ip == neverIP6 {
		return false
	}
	if _, ok := l.v6[ip]; ok {
		return true
	}
	for _, p := range l.v6prefix {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
