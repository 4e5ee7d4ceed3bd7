package blackbox

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

const ioTimeout = 30 * time.Second

// smtpConn is a minimal SMTP client that shows every reply code, for
// tests that check the server's answers line by line.
type smtpConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// dialSMTP connects, reads the 220 greeting and says EHLO.
func dialSMTP(t *testing.T, addr string) *smtpConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial SMTP %s: %v", addr, err)
	}
	s := &smtpConn{t: t, c: c, r: bufio.NewReader(c)}
	t.Cleanup(func() { c.Close() })
	if code, text, err := s.reply(); err != nil || code != 220 {
		t.Fatalf("SMTP greeting: %d %q %v", code, text, err)
	}
	s.expect("EHLO client.example", 250)
	return s
}

// rawSMTP connects, reads the greeting and says EHLO, without a
// *testing.T, for use from several goroutines.
func rawSMTP(addr string) (*smtpConn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	s := &smtpConn{c: c, r: bufio.NewReader(c)}
	if code, text, err := s.reply(); err != nil || code != 220 {
		c.Close()
		return nil, fmt.Errorf("greeting %d %q: %v", code, text, err)
	}
	if code, text, err := s.cmd("EHLO client.example"); err != nil || code != 250 {
		c.Close()
		return nil, fmt.Errorf("EHLO: %d %q: %v", code, text, err)
	}
	return s, nil
}

// Close closes the connection.
func (s *smtpConn) Close() error { return s.c.Close() }

// transaction runs MAIL, RCPT and DATA and returns an error unless
// the message got 250.
func (s *smtpConn) transaction(from string, rcpts []string, msg []byte) error {
	if code, text, err := s.cmd("MAIL FROM:<" + from + ">"); err != nil || code != 250 {
		return fmt.Errorf("MAIL: %d %q %v", code, text, err)
	}
	for _, r := range rcpts {
		if code, text, err := s.cmd("RCPT TO:<" + r + ">"); err != nil || code != 250 {
			return fmt.Errorf("RCPT %s: %d %q %v", r, code, text, err)
		}
	}
	code, text, err := s.data(msg)
	if err != nil || code != 250 {
		return fmt.Errorf("end of DATA: %d %q %v", code, text, err)
	}
	return nil
}

// reply reads one (possibly multi-line) reply.
func (s *smtpConn) reply() (int, string, error) {
	_ = s.c.SetReadDeadline(time.Now().Add(ioTimeout))
	var text []string
	for range 1000 {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return 0, strings.Join(text, "\n"), fmt.Errorf("read reply: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if len(line) < 3 {
			return 0, line, fmt.Errorf("short reply line %q", line)
		}
		code, err := strconv.Atoi(line[:3])
		if err != nil {
			return 0, line, fmt.Errorf("reply line %q: %w", line, err)
		}
		text = append(text, line)
		if len(line) == 3 || line[3] == ' ' {
			return code, strings.Join(text, "\n"), nil
		}
	}
	return 0, strings.Join(text, "\n"), fmt.Errorf("reply longer than 1000 lines")
}

// cmd sends one command line and returns the reply.
func (s *smtpConn) cmd(line string) (int, string, error) {
	_ = s.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := s.c.Write([]byte(line + "\r\n")); err != nil {
		return 0, "", fmt.Errorf("write %q: %w", line, err)
	}
	return s.reply()
}

// expect sends a command and fails the test unless the reply has code.
func (s *smtpConn) expect(line string, code int) string {
	s.t.Helper()
	got, text, err := s.cmd(line)
	if err != nil || got != code {
		s.t.Fatalf("SMTP %q: want %d, got %d %q (%v)", line, code, got, text, err)
	}
	return text
}

// expectClass sends a command and fails unless the reply code is in
// [lo, hi].
func (s *smtpConn) expectClass(line string, lo, hi int) (int, string) {
	s.t.Helper()
	got, text, err := s.cmd(line)
	if err != nil || got < lo || got > hi {
		s.t.Fatalf("SMTP %q: want %d..%d, got %d %q (%v)", line, lo, hi, got, text, err)
	}
	return got, text
}

// data sends DATA, the dot-stuffed message (CRLF line endings) and the
// final dot, and returns the final reply.
func (s *smtpConn) data(msg []byte) (int, string, error) {
	code, text, err := s.cmd("DATA")
	if err != nil || code != 354 {
		return code, text, fmt.Errorf("DATA: %d %q %v", code, text, err)
	}
	_ = s.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := s.c.Write(dotStuff(msg)); err != nil {
		return 0, "", fmt.Errorf("write message: %w", err)
	}
	return s.reply()
}

// send runs one transaction and fails unless every step succeeds.
func (s *smtpConn) send(from string, rcpts []string, msg []byte) {
	s.t.Helper()
	s.expect("MAIL FROM:<"+from+">", 250)
	for _, r := range rcpts {
		s.expect("RCPT TO:<"+r+">", 250)
	}
	if code, text, err := s.data(msg); err != nil || code != 250 {
		s.t.Fatalf("end of DATA: want 250, got %d %q (%v)", code, text, err)
	}
}

// dotStuff returns msg (CRLF lines) with leading dots doubled, ending in
// CRLF.CRLF (RFC 5321 §4.5.2).
func dotStuff(msg []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(msg) + 64)
	for len(msg) > 0 {
		line := msg
		if i := bytes.Index(msg, []byte("\r\n")); i >= 0 {
			line = msg[:i+2]
		}
		msg = msg[len(line):]
		if line[0] == '.' {
			b.WriteByte('.')
		}
		b.Write(line)
	}
	if b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		b.WriteString("\r\n")
	}
	b.WriteString(".\r\n")
	return b.Bytes()
}
