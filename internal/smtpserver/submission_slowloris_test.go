package smtpserver

import (
	"bufio"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

// TestTrickledCommandTimesOut: a client that sends one byte at a time and
// never ends its line is dropped at the read timeout, on the STARTTLS
// port and on the implicit-TLS port. Without the guardConn read guard,
// bufio hands go-smtp the partial line when the deadline passes, go-smtp
// answers it and waits afresh, and the session lives as long as the
// client keeps trickling.
func TestSubmissionTrickledCommandTimesOut(t *testing.T) {
	const timeout = 400 * time.Millisecond
	e := newSubmitEnv(t, Config{ReadTimeout: timeout})
	for _, implicit := range []bool{false, true} {
		name := "plain"
		if implicit {
			name = "implicit TLS"
		}
		t.Run(name, func(t *testing.T) {
			var c net.Conn
			var err error
			if implicit {
				c, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.tlsAddr, e.clientTLS)
			} else {
				c, err = net.DialTimeout("tcp", e.addr, 5*time.Second)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
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
			// Trickle for up to 10 read timeouts, a byte every timeout/4.
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
		})
	}
}

// TestSlowButCompleteCommands: a client that sends whole commands, each
// within the read timeout, is not cut by the guard.
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
