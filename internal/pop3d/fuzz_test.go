package pop3d

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzLineReader reads fuzzer-made input as POP3 command lines: no line
// returned is longer than the limit or holds a line break, an overlong
// line is reported and skipped, and the reader always ends (every call
// consumes input or fails).
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("USER a\r\nPASS b\r\nSTAT\r\n"), uint8(8))
	f.Add([]byte("x\ny\r\n\r\n"), uint8(1))
	f.Add(bytes.Repeat([]byte("A"), 2000), uint8(3))
	f.Add([]byte("LIST\r"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, max uint8) {
		limit := int(max) + 1
		lr := newLineReader(iotest.OneByteReader(bytes.NewReader(data)), limit)
		for range len(data) + 2 {
			line, err := lr.readLine()
			if errors.Is(err, errLineTooLong) {
				continue
			}
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(line) > limit || strings.ContainsAny(line, "\n") {
				t.Fatalf("line %q (limit %d)", line, limit)
			}
		}
		t.Fatalf("reader did not reach the end of %d bytes", len(data))
	})
}
