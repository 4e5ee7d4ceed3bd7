package smtpserver

import (
	"bytes"
	"strings"
	"testing"
)

// refFrame is the framing rules of framer written the obvious way, over
// the whole input at once: the end of data, whether it is refused as
// smuggling, and the normalized content. consumed is how many input bytes
// the DATA took (end marker included); -1 when there is no end.
func refFrame(in []byte, dotStuffed bool, maxLine int) (content []byte, consumed int, smuggle, tooLong bool) {
	data := in
	consumed = len(in)
	if dotStuffed {
		e := bytes.Index(append([]byte("\r\n"), in...), []byte("\r\n.\r\n"))
		if e < 0 {
			consumed = -1
		} else {
			data, consumed = in[:e], e+3
		}
	}
	// Line lengths, up to the end of data.
	line := 0
	limit := len(data)
	if consumed >= 0 && dotStuffed {
		limit = consumed - 1 // the marker's "." and CR count as a line too
	}
	for _, b := range in[:limit] {
		if b == '\n' {
			line = 0
			continue
		}
		line++
		if maxLine > 0 && line >= maxLine {
			return nil, 0, false, true
		}
	}
	if consumed < 0 {
		return nil, -1, false, false
	}
	for i, b := range data {
		if b != '.' {
			continue
		}
		prev, next := byte('\n'), byte(0)
		if i > 0 {
			prev = data[i-1]
		}
		if i+1 < len(data) {
			next = data[i+1]
		}
		if (prev != '\r' && prev != '\n') || (next != '\r' && next != '\n') {
			continue
		}
		canonical := (i == 0 || (i >= 2 && data[i-2] == '\r' && prev == '\n')) &&
			next == '\r' && i+2 < len(data) && data[i+2] == '\n'
		if !canonical || dotStuffed {
			smuggle = true
		}
	}
	lines := bytes.Split(data, []byte("\n"))
	for k, l := range lines {
		last := k == len(lines)-1
		if last && len(l) == 0 {
			break
		}
		if !last {
			l = bytes.TrimRight(l, "\r")
		}
		if dotStuffed && len(l) > 0 && l[0] == '.' {
			l = l[1:]
		}
		content = append(content, l...)
		if !last {
			content = append(content, '\r', '\n')
		}
	}
	return content, consumed, smuggle, false
}

// runFramer feeds in to a framer in pieces cut at the given points.
func runFramer(in []byte, dotStuffed bool, maxLine int, cuts []int) (content []byte, consumed int, smuggle, tooLong bool) {
	f := newFramer(dotStuffed, maxLine)
	prev := 0
	consumed = -1
	total := 0
	for _, c := range append(cuts, len(in)) {
		if c < prev || c > len(in) {
			continue
		}
		n := f.feed(in[prev:c])
		total += n
		if f.done || f.tooLong {
			consumed = total
			break
		}
		prev = c
	}
	if !dotStuffed && !f.tooLong {
		f.finishChunks()
		consumed = len(in)
	}
	return f.out, consumed, f.smuggle, f.tooLong
}

func TestFramerCases(t *testing.T) {
	for _, tc := range []struct {
		in      string
		content string // "" with refused
		refused bool
	}{
		{".\r\n", "", false},
		{"a\r\n.\r\n", "a\r\n", false},
		{"..\r\n.x\r\nmid.dle\r\n.\r\n", ".\r\nx\r\nmid.dle\r\n", false},
		{"a\nb\r\n.\r\n", "a\r\nb\r\n", false},            // bare LF normalized
		{"a\rb\r\n.\r\n", "a\rb\r\n", false},              // bare CR kept
		{"a\r\r\n.\r\n", "a\r\n", false},                  // CRs before LF dropped
		{"a\n..b\r\n.\r\n", "a\r\n.b\r\n", false},         // unstuffed after a bare LF too
		{"a\r.b\r\n.\r\n", "a\r.b\r\n", false},            // not a line start
		{"hello\r\n.\r\r\n.\r\n", "", true},               // issue 28: Postfix ends here
		{"hello\r\r\n.\r\n", "hello\r\n", false},          // issue 28: last line ends CR CR LF
		{"a\r\n.\rX\r\n.\r\n", "", true},                  // issue 28: "." CR x
		{"a\n.\nMAIL FROM:<x@y>\r\n.\r\n", "", true},      // LF . LF
		{"a\n.\r\nMAIL FROM:<x@y>\r\n.\r\n", "", true},    // LF . CRLF
		{"a\r\n.\nMAIL FROM:<x@y>\r\n.\r\n", "", true},    // CRLF . LF
		{"a\r.\rMAIL FROM:<x@y>\r\n.\r\n", "", true},      // CR . CR
		{"a\r.\r\nMAIL FROM:<x@y>\r\n.\r\n", "", true},    // CR . CRLF
		{".\nMAIL FROM:<x@y>\r\n.\r\n", "", true},         // the first line
		{"a\r\n..\nb\r\n.\r\n", "a\r\n.\r\nb\r\n", false}, // a stuffed dot line ending in bare LF
		{"a\r\n..\n.\r\n.\r\n", "", true},                 // LF . CRLF after it
		{"a\r\n\r\n.\r\n", "a\r\n\r\n", false},            // empty lines
		{"\n\nb\r\n.\r\n", "\r\n\r\nb\r\n", false},        // bare LF empty lines
		{"a\r\n.\r\nQUIT\r\n", "a\r\n", false},            // the rest is the next command
		{strings.Repeat("x", 70) + "\r\n.\r\n", strings.Repeat("x", 70) + "\r\n", false},
	} {
		for cut := 0; cut <= len(tc.in); cut++ {
			got, _, smuggle, _ := runFramer([]byte(tc.in), true, 0, []int{cut})
			if smuggle != tc.refused || (!tc.refused && string(got) != tc.content) {
				t.Errorf("%q cut at %d: content %q refused %v, want %q %v", tc.in, cut, got, smuggle, tc.content, tc.refused)
			}
		}
	}
}

func TestFramerEndLeavesTheRest(t *testing.T) {
	in := []byte("a\r\n.\r\nQUIT\r\n")
	f := newFramer(true, 0)
	n := f.feed(in)
	if !f.done || string(in[n:]) != "QUIT\r\n" {
		t.Fatalf("done %v, rest %q", f.done, in[n:])
	}
}

func TestFramerLineLimit(t *testing.T) {
	f := newFramer(true, 10)
	f.feed([]byte("12345678\r\n"))
	if f.tooLong {
		t.Fatal("10 octets with CR LF: too long")
	}
	f.feed([]byte("1234567890"))
	if !f.tooLong {
		t.Fatal("10 octets without LF: not too long")
	}
}

func TestFramerAgainstReference(t *testing.T) {
	alphabet := []byte("\r\n.ab")
	var in []byte
	var rec func(depth int)
	checked := 0
	rec = func(depth int) {
		if depth == 0 {
			for _, dot := range []bool{true, false} {
				compareFramer(t, append(append([]byte(nil), in...), "\r\n.\r\n"...), dot, 0, nil)
				compareFramer(t, in, dot, 4, []int{len(in) / 2})
				checked++
			}
			return
		}
		for _, c := range alphabet {
			in = append(in, c)
			rec(depth - 1)
			in = in[:len(in)-1]
		}
	}
	for d := 0; d <= 6; d++ {
		rec(d)
	}
	t.Logf("%d inputs", checked)
}

func compareFramer(t *testing.T, in []byte, dot bool, maxLine int, cuts []int) {
	t.Helper()
	wc, wn, ws, wt := refFrame(in, dot, maxLine)
	gc, gn, gs, gt := runFramer(in, dot, maxLine, cuts)
	if wt || gt {
		if wt != gt {
			t.Fatalf("%q (dot %v, max %d): too long %v, want %v", in, dot, maxLine, gt, wt)
		}
		return
	}
	if wn < 0 || gn < 0 {
		if wn != gn {
			t.Fatalf("%q (dot %v, cuts %v): consumed %d, want %d", in, dot, cuts, gn, wn)
		}
		return
	}
	if wn != gn || ws != gs || (!ws && !bytes.Equal(wc, gc)) {
		t.Fatalf("%q (dot %v, cuts %v): consumed %d smuggle %v content %q; want %d %v %q", in, dot, cuts, gn, gs, gc, wn, ws, wc)
	}
}

func FuzzFramer(f *testing.F) {
	for _, s := range []string{"a\r\n.\r\n", "a\n.\n", "hello\r\n.\r\r\n.\r\n", "a\r.\rb", "..\r\n", "\r\r\n\n.\r\n"} {
		f.Add([]byte(s), uint8(3), uint16(2), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, maxLine uint8, cut uint16, dot bool) {
		compareFramer(t, in, dot, int(maxLine), []int{int(cut)})
		compareFramer(t, in, dot, 0, []int{int(cut), int(cut) + 1})
	})
}
