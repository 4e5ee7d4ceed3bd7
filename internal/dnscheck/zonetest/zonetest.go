// Package zonetest serves a zone from zone-file text on a loopback DNS
// server (UDP and TCP on one port), for tests that check published
// records: the unit tests of dnscheck and the black-box test of
// `pimail check dns`. It answers authoritatively for the names it holds,
// follows CNAMEs inside the zone (RFC 1034 §4.3.2), and says NXDOMAIN for
// names it does not hold.
package zonetest

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Server is a running zone server.
type Server struct {
	Addr string // 127.0.0.1:port, for UDP and TCP

	mu   sync.Mutex
	rrs  map[string][]dns.RR // lower-case owner name with final dot
	udp  *dns.Server
	tcp  *dns.Server
	once sync.Once
}

// Start parses the zone text (see Parse) and serves it.
func Start(zone string) (*Server, error) {
	s := &Server{rrs: map[string][]dns.RR{}}
	rrs, err := Parse(zone)
	if err != nil {
		return nil, err
	}
	for _, rr := range rrs {
		s.add(rr)
	}
	var pc net.PacketConn
	var ln net.Listener
	for range 20 { // the TCP port of a free UDP port may be taken
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("zonetest: listen: %w", err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		return nil, errors.New("zonetest: no free UDP+TCP port pair on loopback")
	}
	s.Addr = pc.LocalAddr().String()
	started := make(chan struct{}, 2)
	s.udp = &dns.Server{PacketConn: pc, Handler: s, NotifyStartedFunc: func() { started <- struct{}{} }}
	s.tcp = &dns.Server{Listener: ln, Handler: s, NotifyStartedFunc: func() { started <- struct{}{} }}
	go func() { _ = s.udp.ActivateAndServe() }()
	go func() { _ = s.tcp.ActivateAndServe() }()
	for range 2 {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			s.Close()
			return nil, errors.New("zonetest: server did not start")
		}
	}
	return s, nil
}

// Parse reads zone-file text. Lines that are not records (prose around
// them) must be comments; records may span lines in parentheses.
func Parse(zone string) ([]dns.RR, error) {
	zp := dns.NewZoneParser(strings.NewReader(zone), ".", "")
	var out []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		out = append(out, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("zonetest: parse zone: %w", err)
	}
	return out, nil
}

// Add adds a record given as one zone-file line.
func (s *Server) Add(line string) error {
	rr, err := dns.NewRR(line)
	if err != nil || rr == nil {
		return fmt.Errorf("zonetest: bad record %q: %v", line, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(rr)
	return nil
}

func (s *Server) add(rr dns.RR) {
	name := strings.ToLower(rr.Header().Name)
	s.rrs[name] = append(s.rrs[name], rr)
}

// Remove deletes the records of a type at a name and reports how many.
func (s *Server) Remove(name, typ string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(dns.Fqdn(name))
	t := dns.StringToType[strings.ToUpper(typ)]
	var keep []dns.RR
	for _, rr := range s.rrs[key] {
		if rr.Header().Rrtype != t {
			keep = append(keep, rr)
		}
	}
	n := len(s.rrs[key]) - len(keep)
	if len(keep) == 0 {
		delete(s.rrs, key)
	} else {
		s.rrs[key] = keep
	}
	return n
}

// Close stops the server.
func (s *Server) Close() {
	s.once.Do(func() {
		_ = s.udp.Shutdown()
		_ = s.tcp.Shutdown()
	})
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	if len(q.Question) == 1 {
		s.answer(m, q.Question[0])
	}
	if o := q.IsEdns0(); o != nil {
		m.SetEdns0(o.UDPSize(), false)
	}
	_ = w.WriteMsg(m)
}

func (s *Server) answer(m *dns.Msg, qq dns.Question) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := strings.ToLower(qq.Name)
	if _, ok := s.rrs[name]; !ok {
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, s.soa(name))
		return
	}
	for range 8 { // bounded CNAME chain
		var cname *dns.CNAME
		for _, rr := range s.rrs[name] {
			if rr.Header().Rrtype == qq.Qtype {
				m.Answer = append(m.Answer, dns.Copy(rr))
			} else if c, ok := rr.(*dns.CNAME); ok && qq.Qtype != dns.TypeCNAME {
				cname = c
			}
		}
		if cname == nil || len(m.Answer) > 0 && m.Answer[len(m.Answer)-1].Header().Rrtype == qq.Qtype {
			break
		}
		m.Answer = append(m.Answer, dns.Copy(cname))
		name = strings.ToLower(cname.Target)
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, s.soa(name))
	}
}

// soa is a negative-answer SOA (RFC 2308 §3) for the parent of name.
func (s *Server) soa(name string) dns.RR {
	zone := name
	if i := strings.IndexByte(name, '.'); i >= 0 && i+1 < len(name) {
		zone = name[i+1:]
	}
	rr, _ := dns.NewRR(zone + " 60 IN SOA ns." + zone + " hostmaster." + zone + " 1 3600 600 86400 60")
	return rr
}
