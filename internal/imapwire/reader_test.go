package imapwire

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

type contRecorder struct {
	sizes []int64
}

func (c *contRecorder) cont(n int64) error { c.sizes = append(c.sizes, n); return nil }

func newTestReader(input string, lim Limits) (*Reader, *contRecorder) {
	c := &contRecorder{}
	return NewReader(bufio.NewReaderSize(strings.NewReader(input), 4096), lim, c.cont), c
}

func TestReadCommandArgs(t *testing.T) {
	in := "a1 FETCH 1:*,3 (FLAGS BODY.PEEK[1.2.HEADER.FIELDS (From \"To\")]<0.100> UID) \"q\\\"x\" {3}\r\nabc NIL\r\n"
	r, c := newTestReader(in, Limits{})
	cmd, err := r.ReadCommand()
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Tag != "a1" || cmd.Name != "FETCH" || len(cmd.Args) != 5 {
		t.Fatalf("cmd = %+v", cmd)
	}
	if cmd.Args[0].Str != "1:*,3" {
		t.Errorf("seqset arg = %q", cmd.Args[0].Str)
	}
	l := cmd.Args[1]
	if l.Kind != KindList || len(l.List) != 3 || l.List[1].Str != `BODY.PEEK[1.2.HEADER.FIELDS (From "To")]<0.100>` {
		t.Errorf("list = %+v", l)
	}
	if cmd.Args[2].Kind != KindQuoted || cmd.Args[2].Str != `q"x` {
		t.Errorf("quoted = %+v", cmd.Args[2])
	}
	if cmd.Args[3].Kind != KindLiteral || string(cmd.Args[3].Lit) != "abc" {
		t.Errorf("literal = %+v", cmd.Args[3])
	}
	if !cmd.Args[4].IsNIL() {
		t.Errorf("NIL = %+v", cmd.Args[4])
	}
	if len(c.sizes) != 1 || c.sizes[0] != 3 {
		t.Errorf("continuations = %v", c.sizes)
	}
}

func TestNonSyncLiteralNoContinuation(t *testing.T) {
	r, c := newTestReader("a APPEND INBOX {5+}\r\nhello\r\nb NOOP\r\n", Limits{})
	cmd, err := r.ReadCommand()
	if err != nil {
		t.Fatal(err)
	}
	if string(cmd.Args[1].Lit) != "hello" || len(c.sizes) != 0 {
		t.Fatalf("args %+v conts %v", cmd.Args, c.sizes)
	}
	cmd, err = r.ReadCommand()
	if err != nil || cmd.Name != "NOOP" {
		t.Fatalf("next: %v %v", cmd, err)
	}
}

func TestLineTooLong(t *testing.T) {
	long := "t1 NOOP " + strings.Repeat("x", 10000) + "\r\nt2 NOOP\r\n"
	r, _ := newTestReader(long, Limits{MaxLine: 1000})
	_, err := r.ReadCommand()
	var pe *Error
	if !errors.As(err, &pe) || pe.Tag != "t1" || pe.Msg != ErrLineTooLong || pe.Fatal {
		t.Fatalf("err = %#v", err)
	}
	cmd, err := r.ReadCommand()
	if err != nil || cmd.Tag != "t2" {
		t.Fatalf("after long line: %v %v", cmd, err)
	}
}

func TestHugeSyncLiteralRefusedBeforeContinuation(t *testing.T) {
	r, c := newTestReader("a APPEND INBOX {1000000000}\r\nb NOOP\r\n", Limits{MaxLiteral: 1 << 20})
	_, err := r.ReadCommand()
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != "TOOBIG" || pe.Fatal || pe.Tag != "a" {
		t.Fatalf("err = %#v", err)
	}
	if len(c.sizes) != 0 {
		t.Fatalf("continuation sent for refused literal")
	}
	cmd, err := r.ReadCommand()
	if err != nil || cmd.Tag != "b" {
		t.Fatalf("next: %v %v", cmd, err)
	}
}

func TestNonSyncLiteralOverLimit(t *testing.T) {
	// Small enough to discard: the session goes on.
	in := "a APPEND INBOX {2000+}\r\n" + strings.Repeat("y", 2000) + "\r\nb NOOP\r\n"
	r, _ := newTestReader(in, Limits{MaxLiteral: 1000, MaxDiscard: 10000})
	_, err := r.ReadCommand()
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != "TOOBIG" || pe.Fatal {
		t.Fatalf("err = %#v", err)
	}
	cmd, err := r.ReadCommand()
	if err != nil || cmd.Tag != "b" {
		t.Fatalf("next: %v %v", cmd, err)
	}
	// Too big to discard: fatal, without reading it.
	r, _ = newTestReader("a APPEND INBOX {1000000000+}\r\n", Limits{MaxLiteral: 1000})
	_, err = r.ReadCommand()
	if !errors.As(err, &pe) || !pe.Fatal {
		t.Fatalf("err = %#v", err)
	}
}

func TestSyntaxErrorsKeepStream(t *testing.T) {
	in := strings.Join([]string{
		"", "*", "a", "a (", "a NOOP (", "a NOOP \"abc", "a NOOP \"a\\x\"", "a NOOP {x}",
		"a NOOP BODY[1 (x", "a\x00 NOOP", "a NOOP ((((((((((((((((((((((((((((((((((((((((((((x",
		"a NOOP x{3+}\r\nabc", "z NOOP",
	}, "\r\n") + "\r\n"
	r, _ := newTestReader(in, Limits{})
	for i := 0; i < 100; i++ {
		cmd, err := r.ReadCommand()
		if err == io.EOF {
			t.Fatal("never reached the last command")
		}
		var pe *Error
		if errors.As(err, &pe) {
			if pe.Fatal {
				t.Fatalf("fatal: %v", pe)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Tag == "z" {
			return
		}
		t.Fatalf("garbage accepted: %+v", cmd)
	}
}

func TestCommandLiteralTotal(t *testing.T) {
	in := "a X {6}\r\nabcdef {6}\r\nabcdef\r\n"
	r, c := newTestReader(in, Limits{MaxLiteral: 8, MaxCommandLiterals: 10})
	_, err := r.ReadCommand()
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != "TOOBIG" {
		t.Fatalf("err = %#v", err)
	}
	if len(c.sizes) != 1 {
		t.Fatalf("continuations %v", c.sizes)
	}
}

// TestBracketInAtom: "[" without a matching "]" is an ATOM-CHAR (RFC 9051
// §9), so a mailbox may be named foo[bar; a section runs to its "]",
// spaces included (imaptest's atoms test sent SELECT with such a name and
// got BAD "unterminated [").
func TestBracketInAtom(t *testing.T) {
	r, _ := newTestReader("a SELECT foo[bar\r\nb LIST \"\" !#$&'+,-.0123456789:;<=>?@^_`|[}%*\r\nc FETCH 1 BODY[HEADER.FIELDS (A B)]<0.5>\r\n", Limits{})
	for _, want := range []string{"foo[bar", "!#$&'+,-.0123456789:;<=>?@^_`|[}%*", "BODY[HEADER.FIELDS (A B)]<0.5>"} {
		cmd, err := r.ReadCommand()
		if err != nil {
			t.Fatalf("%q: %v", want, err)
		}
		if got := cmd.Args[len(cmd.Args)-1]; got.Kind != KindAtom || got.Str != want {
			t.Fatalf("last argument = %+v, want the atom %q", got, want)
		}
	}
}
