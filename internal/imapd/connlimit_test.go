package imapd

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestClientKeyOf(t *testing.T) {
	for _, c := range []struct {
		addr   string
		key    string
		exempt bool
	}{
		{"192.0.2.7:1234", "192.0.2.7/32", false},
		{"[::ffff:192.0.2.7]:1234", "192.0.2.7/32", false},
		{"[2001:db8:1:2:3:4:5:6]:143", "2001:db8:1:2::/64", false},
		{"[2001:db8:1:2:ffff::1]:143", "2001:db8:1:2::/64", false},
		{"127.0.0.1:5", "127.0.0.1/32", true},
		{"127.9.9.9:5", "127.9.9.9/32", true},
		{"[::1]:5", "::/64", true},
	} {
		ap := netip.MustParseAddrPort(c.addr)
		key, exempt := clientKeyOf(net.TCPAddrFromAddrPort(ap))
		if key.String() != c.key || exempt != c.exempt {
			t.Errorf("%s: key %s exempt %v, want %s %v", c.addr, key, exempt, c.key, c.exempt)
		}
	}
}

func TestConnLimiter(t *testing.T) {
	l := newConnLimiter(4, 2)
	a := netip.MustParsePrefix("192.0.2.1/32")
	b := netip.MustParsePrefix("2001:db8::/64")
	lo := netip.MustParsePrefix("127.0.0.1/32")
	for i, want := range []string{"", "", overClientLimit} {
		if got := l.acquire(a, false); got != want {
			t.Fatalf("a #%d: %q, want %q", i, got, want)
		}
	}
	if got := l.acquire(b, false); got != "" {
		t.Fatalf("b: %q", got)
	}
	// Loopback skips the per-address limit but not the total.
	if got := l.acquire(lo, true); got != "" {
		t.Fatalf("loopback: %q", got)
	}
	if got := l.acquire(lo, true); got != overTotalLimit {
		t.Fatalf("loopback over total: %q", got)
	}
	l.release(a)
	if got := l.acquire(a, false); got != "" {
		t.Fatalf("a after release: %q", got)
	}
	for _, k := range []netip.Prefix{a, a, b, lo} {
		l.release(k)
	}
	if l.total != 0 || len(l.open) != 0 {
		t.Fatalf("after releasing all: total %d, open %v", l.total, l.open)
	}
	// Negative limits mean none.
	u := newConnLimiter(-1, -1)
	for range 100 {
		if got := u.acquire(a, false); got != "" {
			t.Fatalf("unlimited: %q", got)
		}
	}
}

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
	env := newTestEnv(t, Config{})
	srv := New(cfg, env.st, testAuth{env.st}, env.srv.log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener = ln
	if remote != nil {
		l = &fakeRemoteListener{ln, remote}
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
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
	if line != "* BYE [UNAVAILABLE] too many connections\r\n" {
		t.Fatalf("over the limit: %q", line)
	}
	var b [1]byte
	if n, err := c.Read(b[:]); n != 0 || err == nil {
		t.Fatalf("connection not closed after BYE: %d %v", n, err)
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
		if !strings.HasPrefix(l, "* OK") {
			t.Fatalf("greeting %q", l)
		}
	}
	expectRefused(t, addr) // third from the same /64
	if l, _ := greeting(t, addr); !strings.HasPrefix(l, "* OK") {
		t.Fatalf("other address refused: %q", l)
	}
	c1.Close()
	// The slot comes back once the server sees the close.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, c := greeting(t, addr)
		if strings.HasPrefix(l, "* OK") {
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
		if l, _ := greeting(t, addr); !strings.HasPrefix(l, "* OK") {
			t.Fatalf("greeting %q", l)
		}
	}
	expectRefused(t, addr)
}
