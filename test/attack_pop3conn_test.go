package blackbox

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// pop3Conn is a raw POP3 connection (RFC 1939) for the attack and flood
// tests.
type pop3Conn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// dialPOP3 connects and reads the +OK greeting.
func dialPOP3(t *testing.T, addr string) *pop3Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial POP3 %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	p := &pop3Conn{t: t, c: c, r: bufio.NewReader(c)}
	if line, err := p.line(); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("POP3 greeting %q: %v", line, err)
	}
	return p
}

// line reads one response line without its CRLF.
func (p *pop3Conn) line() (string, error) {
	_ = p.c.SetReadDeadline(time.Now().Add(ioTimeout))
	s, err := p.r.ReadString('\n')
	if err != nil {
		return s, fmt.Errorf("read POP3 response: %w", err)
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// cmd sends a command and returns its first response line.
func (p *pop3Conn) cmd(line string) (string, error) {
	_ = p.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := p.c.Write([]byte(line + "\r\n")); err != nil {
		return "", err
	}
	return p.line()
}

// expectOK sends a command and fails unless the answer is +OK.
func (p *pop3Conn) expectOK(line string) string {
	p.t.Helper()
	resp, err := p.cmd(line)
	if err != nil || !strings.HasPrefix(resp, "+OK") {
		p.t.Fatalf("POP3 %q: want +OK, got %q %v", clip(line, 60), resp, err)
	}
	return resp
}
