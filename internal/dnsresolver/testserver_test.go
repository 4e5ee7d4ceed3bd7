package dnsresolver

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testServer is a DNS server on 127.0.0.1, UDP and TCP on one port.
type testServer struct {
	addr    string
	udpHits atomic.Int64
	tcpHits atomic.Int64
}

// startServer serves h on a random loopback port until the test ends.
func startServer(t *testing.T, h func(w dns.ResponseWriter, r *dns.Msg)) *testServer {
	t.Helper()
	ts := &testServer{}
	var pc net.PacketConn
	var ln net.Listener
	for i := 0; i < 20; i++ { // the TCP port may be taken; try another
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no free UDP+TCP port pair on loopback")
	}
	ts.addr = pc.LocalAddr().String()
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if w.LocalAddr().Network() == "tcp" {
			ts.tcpHits.Add(1)
		} else {
			ts.udpHits.Add(1)
		}
		h(w, r)
	})
	udp := &dns.Server{PacketConn: pc, Handler: handler}
	tcp := &dns.Server{Listener: ln, Handler: handler}
	started := make(chan struct{}, 2)
	udp.NotifyStartedFunc = func() { started <- struct{}{} }
	tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	for i := 0; i < 2; i++ {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("test DNS server did not start")
		}
	}
	t.Cleanup(func() {
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
	})
	return ts
}

// blackhole is a UDP socket that reads queries and never answers.
func blackhole(t *testing.T) (addr string, hits *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hits = new(atomic.Int64)
	go func() {
		buf := make([]byte, 2048)
		for { // ends when the socket is closed at cleanup
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			hits.Add(1)
		}
	}()
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String(), hits
}

func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("bad test RR %q: %v", s, err)
	}
	return r
}
