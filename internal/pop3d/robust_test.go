package pop3d

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestGarbageCommands(t *testing.T) {
	e := newTestEnv(t, Config{MaxErrors: 50}, nil)
	e.deliver(msg1)
	c := e.dial()
	for _, cmd := range []string{"HELO", "", "   ", "\x00\x01\xff", "STAT", "RETR 1", "DELE 1", "RSET", "NOOP", "QUIT now"} {
		if r := c.cmd(cmd); !strings.HasPrefix(r, "-ERR") {
			t.Errorf("%q before login = %q, want -ERR", cmd, r)
		}
	}
	c.ok("CAPA")
	c.multi()
	c.login("alice@example.org")
	for _, cmd := range []string{"STLS", "AUTH PLAIN", "PASS x", "RETR 1 2", "RETR 99999999999", "DELE +1", "STAT 1"} {
		if r := c.cmd(cmd); !strings.HasPrefix(r, "-ERR") {
			t.Errorf("%q after login = %q, want -ERR", cmd, r)
		}
	}
	// The session survived all of it.
	if r := c.ok("STAT"); !strings.HasPrefix(r, "+OK 1 ") {
		t.Errorf("STAT = %q", r)
	}
}

func TestTooManyErrorsClose(t *testing.T) {
	e := newTestEnv(t, Config{MaxErrors: 4}, nil)
	c := e.dial()
	for i := 0; i < 3; i++ {
		if r := c.cmd("XYZZY"); !strings.HasPrefix(r, "-ERR unknown") {
			t.Fatalf("garbage %d = %q", i, r)
		}
	}
	if r := c.cmd("XYZZY"); !strings.Contains(r, "too many") {
		t.Errorf("last garbage = %q", r)
	}
	c.closed()
}

func TestTooManyCommandsBeforeLogin(t *testing.T) {
	e := newTestEnv(t, Config{}, nil)
	c := e.dial()
	for i := 0; i < maxPreAuthCommands; i++ {
		c.ok("USER someone")
	}
	if r := c.cmd("USER someone"); !strings.HasPrefix(r, "-ERR too many") {
		t.Errorf("command %d before login = %q", maxPreAuthCommands+1, r)
	}
	c.closed()
}

func TestLongLineOverTheWire(t *testing.T) {
	e := newTestEnv(t, Config{MaxLineLength: 512}, nil)
	c := e.dial()
	long := strings.Repeat("A", 10<<20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.WriteString(c.c, "USER "+long+"\r\nCAPA\r\n")
	}()
	if r := c.line(); !strings.HasPrefix(r, "-ERR") || !strings.Contains(r, "too long") {
		t.Errorf("10 MB line = %q", r)
	}
	<-done
	if r := c.line(); !strings.HasPrefix(r, "+OK") {
		t.Errorf("CAPA after a long line = %q", r)
	}
	c.multi()
	c.login("alice@example.org")
}

// endless yields n bytes of 'A' without allocating.
type endless struct{ n int }

func (r *endless) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'A'
	}
	r.n -= k
	return k, nil
}

func TestLineReaderDiscardsWithoutGrowing(t *testing.T) {
	const size = 10 << 20
	src := io.MultiReader(&endless{n: size}, strings.NewReader("\r\nNOOP\r\nlast"))
	lr := newLineReader(src, 1024)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := lr.readLine()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errLineTooLong) {
		t.Fatalf("readLine of a 10 MB line: %v", err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("reading a 10 MB line allocated %d bytes", grown)
	}
	if l, err := lr.readLine(); err != nil || l != "NOOP" {
		t.Errorf("next line = %q, %v", l, err)
	}
	if _, err := lr.readLine(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("unterminated last line: %v", err)
	}
}

func TestLineReaderLimits(t *testing.T) {
	lr := newLineReader(strings.NewReader(strings.Repeat("x", 300)+"\r\n"+strings.Repeat("y", 256)+"\n"+"bare\n\r\n"), 256)
	if _, err := lr.readLine(); !errors.Is(err, errLineTooLong) {
		t.Errorf("300-byte line with limit 256: %v", err)
	}
	if l, err := lr.readLine(); err != nil || len(l) != 256 {
		t.Errorf("256-byte line: %d bytes, %v", len(l), err)
	}
	if l, err := lr.readLine(); err != nil || l != "bare" {
		t.Errorf("bare-LF line = %q, %v", l, err)
	}
	if l, err := lr.readLine(); err != nil || l != "" {
		t.Errorf("empty line = %q, %v", l, err)
	}
	if _, err := lr.readLine(); !errors.Is(err, io.EOF) {
		t.Errorf("at end: %v", err)
	}
}
