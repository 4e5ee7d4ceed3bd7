package smtpserver

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// TestTrickledCommandTimesOut: a client that sends one byte at a time and
// never ends its line is dropped at the command timeout. Without the
// gatedConn read guard, bufio hands go-smtp the partial line when the
// deadline passes, go-smtp answers it and waits afresh, and the session
// lives as long as the client keeps trickling.
func TestTrickledCommandTimesOut(t *testing.T) {
	const timeout = 400 * time.Millisecond
	e := newEnv(t, Config{ReadTimeout: timeout})
	c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "220 ") {
		t.Fatalf("greeting %q %v", line, err)
	}
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			if _, err := r.ReadString('\n'); err != nil {
				closed <- time.Since(start)
				return
			}
		}
	}()
	// Trickle for up to 10 command timeouts, a byte every timeout/4.
	for i := 0; i < 40; i++ {
		select {
		case d := <-closed:
			if d > 4*timeout {
				t.Fatalf("trickling client dropped only after %v (command timeout %v)", d, timeout)
			}
			return
		case <-time.After(timeout / 4):
		}
		if _, err := c.Write([]byte("x")); err != nil {
			return // closed by the server
		}
	}
	t.Fatalf("trickling client still connected after %v (command timeout %v)", time.Since(start), timeout)
}
