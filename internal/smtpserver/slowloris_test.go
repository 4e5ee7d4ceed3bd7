package smtpserver

import (
	"bufio"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

// A client that sends one byte at a time and never ends its line is
// dropped at the read timeout (RFC 5321 §4.5.3.2: the timeout bounds a
// command, not each byte of it), in both roles, on submission's STARTTLS
// port and on its implicit-TLS port: the deadline of a line is set when
// the server starts waiting for it (conn.readLine), so bytes that trickle
// in do not move it.
func TestTrickledCommandTimesOut(t *testing.T) {
	const timeout = 400 * time.Millisecond
	mx := newEnv(t, Config{ReadTimeout: timeout})
	sub := newSubmitEnv(t, Config{ReadTimeout: timeout})
	for _, c := range []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{"MX", func() (net.Conn, error) { return net.DialTimeout("tcp", mx.addr, 5*time.Second) }},
		{"submission", func() (net.Conn, error) { return net.DialTimeout("tcp", sub.addr, 5*time.Second) }},
		{"submission implicit TLS", func() (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", sub.tlsAddr, sub.clientTLS)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := c.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			trickle(t, conn, timeout)
		})
	}
}

// trickle reads the greeting, then writes a byte every timeout/4 for up
// to ten timeouts, and fails unless the server closes within 4 timeouts.
func trickle(t *testing.T, c net.Conn, timeout time.Duration) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "220 ") {
		t.Fatalf("greeting %q %v", line, err)
	}
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		for {
			if _, err := r.ReadString('\n'); err != nil {
				closed <- time.Since(start)
				return
			}
		}
	}()
	for range 40 {
		select {
		case d := <-closed:
			if d > 4*timeout {
				t.Fatalf("trickling client dropped only after %v (read timeout %v)", d, timeout)
			}
			t.Logf("dropped after %v", d.Round(time.Millisecond))
			return
		case <-time.After(timeout / 4):
		}
		if _, err := c.Write([]byte("x")); err != nil {
			return // closed by the server
		}
	}
	t.Fatalf("trickling client still connected after %v (read timeout %v)", time.Since(start), timeout)
}

// TestSlowButCompleteCommands: a client that sends whole commands, each
// within the read timeout, is not cut.
func TestSlowButCompleteCommands(t *testing.T) {
	const timeout = 600 * time.Millisecond
	e := newSubmitEnv(t, Config{ReadTimeout: timeout})
	c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "220 ") {
		t.Fatalf("greeting %q %v", line, err)
	}
	for range 4 {
		time.Sleep(timeout / 2)
		if _, err := c.Write([]byte("NOOP\r\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "250 ") {
			t.Fatalf("NOOP: %q %v", line, err)
		}
	}
}
