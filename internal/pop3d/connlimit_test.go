package pop3d

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRemoteListener makes every accepted connection look as if it came
// from the address its next function returns.
type fakeRemoteListener struct {
	net.Listener
	next func() net.Addr
}

func (l *fakeRemoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return fakeRemoteConn{c, l.next()}, nil
}

type fakeRemoteConn struct {
	net.Conn
	remote net.Addr
}

func (c fakeRemoteConn) RemoteAddr() net.Addr { return c.remote }

func startLimited(t *testing.T, cfg Config, remote func() net.Addr) string {
	t.Helper()
	var wrap func(net.Listener) net.Listener
	if remote != nil {
		wrap = func(ln net.Listener) net.Listener { return &fakeRemoteListener{ln, remote} }
	}
	return newTestEnv(t, cfg, wrap).addr
}

// greeting dials and returns the first line and the connection.
func greeting(t *testing.T, addr string) (string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("greeting: %v", err)
	}
	return line, c
}

func expectRefused(t *testing.T, addr string) {
	t.Helper()
	line, c := greeting(t, addr)
	if line != "-ERR [SYS/TEMP] too many connections\r\n" {
		t.Fatalf("over the limit: %q", line)
	}
	var b [1]byte
	if n, err := c.Read(b[:]); n != 0 || err == nil {
		t.Fatalf("connection not closed after the refusal: %d %v", n, err)
	}
}

func TestConnectionLimitPerAddress(t *testing.T) {
	var n atomic.Int32
	// Connections 1-3 and 5 from one IPv6 /64 (different addresses in
	// it), 4 from another address.
	addr := startLimited(t, Config{MaxConnections: 10, MaxConnectionsPerIP: 2}, func() net.Addr {
		k := n.Add(1)
		if k == 4 {
			return &net.TCPAddr{IP: net.ParseIP("192.0.2.9"), Port: 1}
		}
		return &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("2001:db8:0:1::%x", k)), Port: 1}
	})
	l1, c1 := greeting(t, addr)
	l2, _ := greeting(t, addr)
	for _, l := range []string{l1, l2} {
		if !strings.HasPrefix(l, "+OK") {
			t.Fatalf("greeting %q", l)
		}
	}
	expectRefused(t, addr) // third from the same /64
	if l, _ := greeting(t, addr); !strings.HasPrefix(l, "+OK") {
		t.Fatalf("other address refused: %q", l)
	}
	c1.Close()
	// The slot comes back once the server sees the close.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, c := greeting(t, addr)
		if strings.HasPrefix(l, "+OK") {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("slot not released: %q", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConnectionLimitTotalAndLoopback(t *testing.T) {
	addr := startLimited(t, Config{MaxConnections: 4, MaxConnectionsPerIP: 1}, nil)
	for range 4 { // loopback: the per-address limit of 1 does not apply
		if l, _ := greeting(t, addr); !strings.HasPrefix(l, "+OK") {
			t.Fatalf("greeting %q", l)
		}
	}
	expectRefused(t, addr)
}
