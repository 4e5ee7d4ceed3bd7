package dnsbl

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Defaults for the zero values of ZoneConfig.
const (
	DefaultZoneTTL         = time.Hour
	DefaultZoneNegativeTTL = 5 * time.Minute
)

// ZoneConfig configures a ZoneServer.
type ZoneConfig struct {
	// Name is the zone answering the RFC 5782 form, e.g. "bl.example.net".
	Name string
	// BitmapName is the zone answering the prefix-bitmap form; default
	// "bitmap." + Name.
	BitmapName string
	// TTL of the answers for listed addresses; default 1 h.
	TTL time.Duration
	// NegativeTTL is the SOA MINIMUM and so the time resolvers cache
	// "not listed" (RFC 2308 §4); default 5 min.
	NegativeTTL time.Duration
	// Reason is the TXT answer for a listed address (RFC 5782 §2.1);
	// default "Listed by <Name>".
	Reason string
}

// ZoneServer is an authoritative DNS server for one blocklist in both
// forms. It implements dns.Handler; Listen serves it over UDP and TCP, and
// dnsresolver.HandlerTransport asks it in-process. The list is replaced
// atomically with SetList while it serves.
type ZoneServer struct {
	name, bitmapName string
	ttl, negTTL      uint32
	reason           string
	list             atomic.Pointer[listing]
}

// NewZoneServer returns a server with an empty list (only the RFC 5782 §5
// test entries).
func NewZoneServer(cfg ZoneConfig) (*ZoneServer, error) {
	name := dns.Fqdn(strings.ToLower(strings.TrimSpace(cfg.Name)))
	if _, ok := dns.IsDomainName(name); !ok || name == "." {
		return nil, fmt.Errorf("dnsbl: invalid zone name %q", cfg.Name)
	}
	bitmap := dns.Fqdn(strings.ToLower(strings.TrimSpace(cfg.BitmapName)))
	if bitmap == "." {
		bitmap = "bitmap." + name
	}
	if _, ok := dns.IsDomainName(bitmap); !ok || bitmap == name {
		return nil, fmt.Errorf("dnsbl: invalid bitmap zone name %q", cfg.BitmapName)
	}
	z := &ZoneServer{
		name: name, bitmapName: bitmap,
		ttl: seconds(cfg.TTL, DefaultZoneTTL), negTTL: seconds(cfg.NegativeTTL, DefaultZoneNegativeTTL),
		reason: cfg.Reason,
	}
	if z.reason == "" {
		z.reason = "Listed by " + strings.TrimSuffix(name, ".")
	}
	if err := z.SetList(nil); err != nil {
		return nil, err
	}
	return z, nil
}

func seconds(d, def time.Duration) uint32 {
	if d <= 0 {
		d = def
	}
	return uint32(d / time.Second)
}

// Name and BitmapName return the zones served, without the final dot.
func (z *ZoneServer) Name() string       { return strings.TrimSuffix(z.name, ".") }
func (z *ZoneServer) BitmapName() string { return strings.TrimSuffix(z.bitmapName, ".") }

// SetList replaces the listed addresses and prefixes. IPv4 prefixes may
// not be wider than /16.
func (z *ZoneServer) SetList(entries []netip.Prefix) error {
	l, err := newListing(entries)
	if err != nil {
		return err
	}
	z.list.Store(l)
	return nil
}

// ServeDNS answers one query.
func (z *ZoneServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	_ = w.WriteMsg(z.answer(r))
}

// answer builds the reply to r.
func (z *ZoneServer) answer(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	if r.Opcode != dns.OpcodeQuery {
		return m.SetRcode(r, dns.RcodeNotImplemented)
	}
	if len(r.Question) != 1 {
		return m.SetRcode(r, dns.RcodeFormatError)
	}
	m.SetReply(r)
	m.RecursionDesired = r.RecursionDesired
	q := r.Question[0]
	qname := strings.ToLower(q.Name)
	if q.Qclass != dns.ClassINET {
		return m.SetRcode(r, dns.RcodeRefused)
	}
	// The bitmap zone may lie under the RFC 5782 zone: test it first.
	switch {
	case dns.IsSubDomain(z.bitmapName, qname):
		z.answerBitmap(m, q, qname)
	case dns.IsSubDomain(z.name, qname):
		z.answerIP(m, q, qname)
	default:
		m.SetRcode(r, dns.RcodeRefused)
		return m
	}
	m.Authoritative = true
	return m
}

// answerIP answers the RFC 5782 form: A 127.0.0.2 and a TXT reason for a
// listed address (§2.1), NXDOMAIN for an unlisted one.
func (z *ZoneServer) answerIP(m *dns.Msg, q dns.Question, qname string) {
	if qname == z.name {
		z.answerApex(m, q, z.name)
		return
	}
	ip, ok := parseIPName(strings.TrimSuffix(qname, "."+z.name))
	if !ok || !z.list.Load().has(ip) {
		z.negative(m, z.name, true)
		return
	}
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: z.ttl}
	if q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY {
		hdr.Rrtype = dns.TypeA
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.IPv4(127, 0, 0, 2).To4()})
	}
	if q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY {
		hdr.Rrtype = dns.TypeTXT
		m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr, Txt: []string{z.reason}})
	}
	if len(m.Answer) == 0 {
		z.negative(m, z.name, false) // NODATA
	}
}

// answerBitmap answers the prefix-bitmap form (package documentation).
func (z *ZoneServer) answerBitmap(m *dns.Msg, q dns.Question, qname string) {
	if qname == z.bitmapName {
		z.answerApex(m, q, z.bitmapName)
		return
	}
	prefix, ok := parseBitmapName(strings.TrimSuffix(qname, "."+z.bitmapName))
	if !ok {
		z.negative(m, z.bitmapName, true)
		return
	}
	bm := z.list.Load().bitmap(prefix.Addr())
	if bm.Empty() {
		z.negative(m, z.bitmapName, true)
		return
	}
	if q.Qtype != dns.TypeAAAA && q.Qtype != dns.TypeANY {
		z.negative(m, z.bitmapName, false)
		return
	}
	m.Answer = append(m.Answer, &dns.AAAA{
		Hdr:  dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: z.ttl},
		AAAA: net.IP(bm[:]),
	})
}

// answerApex answers for the zone's own name: its SOA and NS.
func (z *ZoneServer) answerApex(m *dns.Msg, q dns.Question, origin string) {
	switch q.Qtype {
	case dns.TypeSOA:
		m.Answer = append(m.Answer, z.soa(origin))
	case dns.TypeNS:
		m.Answer = append(m.Answer, &dns.NS{
			Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: z.ttl},
			Ns:  "ns." + origin,
		})
	default:
		z.negative(m, origin, false)
	}
}

// negative makes m an NXDOMAIN or NODATA answer with the zone's SOA in the
// authority section, from which resolvers take the negative TTL
// (RFC 2308 §3).
func (z *ZoneServer) negative(m *dns.Msg, origin string, nxdomain bool) {
	if nxdomain {
		m.Rcode = dns.RcodeNameError
	}
	m.Ns = append(m.Ns, z.soa(origin))
}

func (z *ZoneServer) soa(origin string) *dns.SOA {
	return &dns.SOA{
		// RFC 2308 §3: the SOA's TTL in a negative answer is min(TTL, MINIMUM).
		Hdr:     dns.RR_Header{Name: origin, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: z.negTTL},
		Ns:      "ns." + origin,
		Mbox:    "hostmaster." + origin,
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  z.negTTL,
	}
}

// parseIPName reads the labels left of the zone in the RFC 5782 form: four
// decimal octets (§2.1) or 32 hex nibbles (§2.4), reversed.
func parseIPName(s string) (netip.Addr, bool) {
	labels := strings.Split(s, ".")
	switch len(labels) {
	case 4:
		var a [4]byte
		for i, l := range labels {
			v, ok := octet(l)
			if !ok {
				return netip.Addr{}, false
			}
			a[3-i] = v
		}
		return netip.AddrFrom4(a), true
	case 32:
		var a [16]byte
		for i, l := range labels {
			if len(l) != 1 {
				return netip.Addr{}, false
			}
			v := strings.IndexByte("0123456789abcdef", l[0])
			if v < 0 {
				return netip.Addr{}, false
			}
			// Label i is nibble 31-i, counted from the most significant.
			n := 31 - i
			if n%2 == 0 {
				a[n/2] |= byte(v) << 4
			} else {
				a[n/2] |= byte(v)
			}
		}
		return netip.AddrFrom16(a), true
	}
	return netip.Addr{}, false
}

// parseBitmapName reads "<h>.<c>.<b>.<a>" into the /25 it names.
func parseBitmapName(s string) (netip.Prefix, bool) {
	labels := strings.Split(s, ".")
	if len(labels) != 4 || (labels[0] != "0" && labels[0] != "1") {
		return netip.Prefix{}, false
	}
	var a [4]byte
	for i := 1; i < 4; i++ {
		v, ok := octet(labels[i])
		if !ok {
			return netip.Prefix{}, false
		}
		a[3-i] = v
	}
	a[3] = (labels[0][0] - '0') << 7
	return netip.PrefixFrom(netip.AddrFrom4(a), BitmapPrefixLen), true
}

// octet parses a decimal 0–255 written without leading zeros.
func octet(l string) (byte, bool) {
	if l == "" || len(l) > 3 || (len(l) > 1 && l[0] == '0') {
		return 0, false
	}
	v := 0
	for _, c := range []byte(l) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return byte(v), v <= 255
}

// Endpoint is a ZoneServer listening on UDP and TCP at one address.
type Endpoint struct {
	addr     string
	udp, tcp *dns.Server
}

// Addr is the address served, host:port.
func (e *Endpoint) Addr() string { return e.addr }

// Close stops serving.
func (e *Endpoint) Close() error {
	return errors.Join(e.udp.Shutdown(), e.tcp.Shutdown())
}

// Listen serves the zone on addr (host:port; port 0 picks one, the same
// for UDP and TCP) until Close.
func (z *ZoneServer) Listen(addr string) (*Endpoint, error) {
	pc, ln, err := listenPair(addr)
	if err != nil {
		return nil, err
	}
	e := &Endpoint{
		addr: pc.LocalAddr().String(),
		udp:  &dns.Server{PacketConn: pc, Handler: z},
		tcp:  &dns.Server{Listener: ln, Handler: z},
	}
	started := make(chan struct{}, 2)
	e.udp.NotifyStartedFunc = func() { started <- struct{}{} }
	e.tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	errc := make(chan error, 2)
	go func() { errc <- e.udp.ActivateAndServe() }()
	go func() { errc <- e.tcp.ActivateAndServe() }()
	for i := 0; i < 2; i++ {
		select {
		case <-started:
		case err := <-errc:
			_ = e.Close()
			return nil, fmt.Errorf("dnsbl: serve %s: %w", e.addr, err)
		case <-time.After(5 * time.Second):
			_ = e.Close()
			return nil, fmt.Errorf("dnsbl: serve %s: did not start", e.addr)
		}
	}
	return e, nil
}

// listenPair opens UDP and TCP on one port. With port 0 the UDP socket
// picks the port, which TCP may already use elsewhere: then it tries again
// (a bounded number of times).
func listenPair(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dnsbl: listen %s: %w", addr, err)
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	for i := 0; ; i++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dnsbl: listen udp %s: %w", addr, err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if i+1 >= tries {
			return nil, nil, fmt.Errorf("dnsbl: listen tcp %s: %w", pc.LocalAddr(), err)
		}
	}
}
