package dnsresolver

import (
	"net"

	"github.com/miekg/dns"
)

// memWriter is the dns.ResponseWriter HandlerTransport gives a handler: it
// keeps the reply message instead of sending it.
type memWriter struct{ msg *dns.Msg }

var memAddr = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}

func (w *memWriter) LocalAddr() net.Addr  { return memAddr }
func (w *memWriter) RemoteAddr() net.Addr { return memAddr }

func (w *memWriter) WriteMsg(m *dns.Msg) error {
	// Pack and unpack, as the wire would, so the reply is a copy that the
	// handler cannot change afterwards and a reply that would not pack
	// fails here too.
	buf, err := m.Pack()
	if err != nil {
		return err
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf); err != nil {
		return err
	}
	w.msg = r
	return nil
}

func (w *memWriter) Write(b []byte) (int, error) {
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		return 0, err
	}
	w.msg = r
	return len(b), nil
}

func (w *memWriter) Close() error        { return nil }
func (w *memWriter) TsigStatus() error   { return nil }
func (w *memWriter) TsigTimersOnly(bool) {}
func (w *memWriter) Hijack()             {}
