package imapd

import (
	"strings"
	"testing"
)

func TestGarbageGetsBAD(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	for i, g := range []string{"\x00\x01\x02", "a1 FOO", "a2 FETCH", "((((", "a3 LOGIN \"unterminated"} {
		r.send(g + "\r\n")
		l := r.line()
		if !strings.Contains(l, " BAD ") {
			t.Fatalf("garbage %d: %q", i, l)
		}
	}
	if res := r.cmd("n", "NOOP"); last(res) != "n OK NOOP completed" {
		t.Fatalf("session did not survive: %q", res)
	}
}

func TestHugeLine(t *testing.T) {
	e := newTestEnv(t, Config{MaxLineLength: 1024})
	r := e.raw()
	r.send("big NOOP " + strings.Repeat("x", 200000) + "\r\n")
	if l := r.line(); !strings.HasPrefix(l, "big BAD") {
		t.Fatalf("huge line: %q", l)
	}
	if res := r.cmd("n", "NOOP"); last(res) != "n OK NOOP completed" {
		t.Fatalf("after huge line: %q", res)
	}
}

func TestHugeLiteralRefusedBeforeContinuation(t *testing.T) {
	e := newTestEnv(t, Config{MaxLiteralSize: 1 << 20})
	r := e.raw()
	r.login()
	r.send("a APPEND INBOX {1073741824}\r\n")
	l := r.line()
	if strings.HasPrefix(l, "+") || !strings.HasPrefix(l, "a NO [TOOBIG]") {
		t.Fatalf("1 GB literal: %q", l)
	}
	if res := r.cmd("n", "NOOP"); last(res) != "n OK NOOP completed" {
		t.Fatalf("after refused literal: %q", res)
	}
	// Before authentication the literal limit is small.
	r2 := e.raw()
	r2.send("b LOGIN {100000}\r\n")
	if l := r2.line(); !strings.HasPrefix(l, "b NO [TOOBIG]") {
		t.Fatalf("pre-auth literal: %q", l)
	}
}

func TestLiteralPlusOverLimit(t *testing.T) {
	e := newTestEnv(t, Config{MaxLiteralSize: 1000})
	r := e.raw()
	r.login()
	// Small enough to discard: answered, and the session goes on.
	r.send("a APPEND INBOX {1500+}\r\n" + strings.Repeat("z", 1500) + "\r\n")
	if l := r.line(); !strings.HasPrefix(l, "a NO [TOOBIG]") {
		t.Fatalf("LITERAL+ over limit: %q", l)
	}
	if res := r.cmd("n", "NOOP"); last(res) != "n OK NOOP completed" {
		t.Fatalf("after LITERAL+: %q", res)
	}
	// Far too big: refused and the connection closed without reading it.
	r.send("b APPEND INBOX {1073741824+}\r\n")
	if l := r.line(); !strings.HasPrefix(l, "b NO [TOOBIG]") {
		t.Fatalf("huge LITERAL+: %q", l)
	}
	if l := r.line(); !strings.HasPrefix(l, "* BYE") {
		t.Fatalf("expected BYE, got %q", l)
	}
}

func TestTooManyBadCommands(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	for i := 0; i < maxBadCommands; i++ {
		r.send("x BOGUS\r\n")
		if l := r.line(); !strings.HasPrefix(l, "x BAD") {
			t.Fatalf("bad %d: %q", i, l)
		}
	}
	if l := r.line(); !strings.HasPrefix(l, "* BYE") {
		t.Fatalf("expected BYE, got %q", l)
	}
}

func TestCommandsInWrongState(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	if l := last(r.cmd("a", "SELECT INBOX")); !strings.HasPrefix(l, "a BAD") {
		t.Fatalf("SELECT before login: %q", l)
	}
	r.login()
	if l := last(r.cmd("b", "FETCH 1 FLAGS")); !strings.HasPrefix(l, "b BAD") {
		t.Fatalf("FETCH without SELECT: %q", l)
	}
}
