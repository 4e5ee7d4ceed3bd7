package smtpdata

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestLineEndingChecker(t *testing.T) {
	tests := []struct {
		data string
		ok   bool
	}{
		{"", true},
		{"a\r\nb\r\n", true},
		{"\r\n\r\n", true},
		{"a\nb", false},
		{"a\rb", false},
		{"a\r\r\n", false},
		{"a\r", false}, // dangling CR at the end
		{"\n", false},
		{"a\r\n\n", false},
	}
	for _, tc := range tests {
		// Whole, and split at every position (the CR/LF pair may straddle reads).
		for cut := 0; cut <= len(tc.data); cut++ {
			var c lineEndingChecker
			c.check([]byte(tc.data[:cut]))
			c.check([]byte(tc.data[cut:]))
			if got := c.finish(); got != tc.ok {
				t.Errorf("%q cut at %d: ok = %v, want %v", tc.data, cut, got, tc.ok)
			}
		}
	}
}

func TestRead(t *testing.T) {
	msg := strings.Repeat("line of text\r\n", 1000)
	var buf bytes.Buffer
	buf.WriteString("Received: x\r\n")
	if err := Read(&buf, iotest.OneByteReader(strings.NewReader(msg)), nil, time.Minute, int64(len(msg))); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "Received: x\r\n"+msg {
		t.Fatal("message altered")
	}
	buf.Reset()
	if err := Read(&buf, strings.NewReader(msg), nil, time.Minute, int64(len(msg)-1)); !errors.Is(err, ErrTooBig) {
		t.Fatalf("over the limit: %v", err)
	}
	buf.Reset()
	err := Read(&buf, strings.NewReader("a\nb\r\n"+msg), nil, time.Minute, 1<<20)
	if !errors.Is(err, ErrBareLineEnding) {
		t.Fatalf("bare LF: %v", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("refused data was kept: %d bytes", buf.Len())
	}
	buf.Reset()
	if err := Read(&buf, iotest.ErrReader(io.ErrUnexpectedEOF), nil, time.Minute, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("broken connection: %v", err)
	}
}

// bareLineEnding is the reference rule of RFC 5321 §2.3.8, written the
// slow, obvious way: every CR must be followed by LF and every LF preceded
// by CR.
func bareLineEnding(p []byte) bool {
	for i, c := range p {
		switch c {
		case '\r':
			if i+1 >= len(p) || p[i+1] != '\n' {
				return true
			}
		case '\n':
			if i == 0 || p[i-1] != '\r' {
				return true
			}
		}
	}
	return false
}

// FuzzLineEndingChecker feeds message data in fuzzer-chosen pieces (split
// points are where SMTP smuggling hides) and compares the streaming
// checker and Read with the reference rule.
func FuzzLineEndingChecker(f *testing.F) {
	for _, s := range []string{
		"Subject: x\r\n\r\nbody\r\n", "a\nb", "a\rb", "a\r\n.\n", "\r", "\n", "\r\r\n", "a\r\n\r\n",
		"x\n.\r\nMAIL FROM:<evil@example.org>\r\n", "\r\n.\r", "",
	} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		n := int(step%16) + 1
		var c lineEndingChecker
		for i := 0; i < len(data); i += n {
			c.check(data[i:min(i+n, len(data))])
		}
		want := bareLineEnding(data)
		if got := !c.finish(); got != want {
			t.Fatalf("checker says bare=%v, reference %v for %q (pieces of %d)", got, want, data, n)
		}
		// Read: the same verdict, the bytes kept unchanged when
		// clean, the size limit honoured.
		var dst bytes.Buffer
		err := Read(&dst, iotest.OneByteReader(bytes.NewReader(data)), nil, time.Second, 1<<20)
		switch {
		case want && !errors.Is(err, ErrBareLineEnding):
			t.Fatalf("Read accepted bare line endings in %q: %v", data, err)
		case !want && err != nil:
			t.Fatalf("Read refused clean data %q: %v", data, err)
		case !want && !bytes.Equal(dst.Bytes(), data):
			t.Fatalf("Read changed the data: %q -> %q", data, dst.Bytes())
		}
		if len(data) > 8 {
			err := Read(&dst, bytes.NewReader(data), nil, time.Second, int64(len(data)/2))
			if !errors.Is(err, ErrTooBig) {
				t.Fatalf("Read over the limit: %v", err)
			}
		}
	})
}
