package pop3d

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
)

func render(t *testing.T, in string, bodyLines int) string {
	t.Helper()
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	if err := writeMessage(w, strings.NewReader(in), bodyLines); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestWriteMessage(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		lines    int
		want     string
	}{
		{"crlf", "A: b\r\n\r\nbody\r\n", allLines, "A: b\r\n\r\nbody\r\n.\r\n"},
		{"bare lf", "A: b\n\nx\ny\n", allLines, "A: b\r\n\r\nx\r\ny\r\n.\r\n"},
		{"no final newline", "A: b\r\n\r\nend", allLines, "A: b\r\n\r\nend\r\n.\r\n"},
		{"empty", "", allLines, ".\r\n"},
		{"dots", ".\r\n..\r\n.x\r\nx.\r\n", allLines, "..\r\n...\r\n..x\r\nx.\r\n.\r\n"},
		{"dot without newline", "A: b\n\n.", allLines, "A: b\r\n\r\n..\r\n.\r\n"},
		{"bare cr kept inside a line", "A: b\r\n\r\na\rb\r\n", allLines, "A: b\r\n\r\na\rb\r\n.\r\n"},
		{"top 0", "A: b\r\nC: d\r\n\r\n1\r\n2\r\n", 0, "A: b\r\nC: d\r\n\r\n.\r\n"},
		{"top 1", "A: b\n\n.1\n2\n", 1, "A: b\r\n\r\n..1\r\n.\r\n"},
		{"top more than body", "A: b\n\n1\n2", 5, "A: b\r\n\r\n1\r\n2\r\n.\r\n"},
		{"top without body", "A: b\r\n", 3, "A: b\r\n.\r\n"},
		{"top counts empty body lines", "A: b\n\n\n\nx\n", 2, "A: b\r\n\r\n\r\n\r\n.\r\n"},
	} {
		if got := render(t, tc.in, tc.lines); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestWriteMessageCRAtBufferBoundary puts the CR of a CRLF at the end of
// the reader's 32 KiB buffer, so that the LF comes in the next chunk.
func TestWriteMessageCRAtBufferBoundary(t *testing.T) {
	long := strings.Repeat("a", 32*1024-1)
	in := "A: b\r\n\r\n"
	// Fill up so that the long line starts at a buffer boundary.
	first := strings.Repeat("b", 32*1024-len(in)-2)
	in += first + "\r\n" + long + "\r\n.next\r\n"
	want := "A: b\r\n\r\n" + first + "\r\n" + long + "\r\n..next\r\n.\r\n"
	if got := render(t, in, allLines); got != want {
		t.Errorf("CRLF split across buffers: output differs (len %d, want %d)", len(got), len(want))
	}
	// A bare CR at the boundary stays a bare CR.
	in2 := long + "\rX\r\n"
	if got, want := render(t, in2, allLines), long+"\rX\r\n.\r\n"; got != want {
		t.Errorf("bare CR at a buffer boundary: output differs")
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("client gone")
}

func TestWriteMessageStopsOnWriteError(t *testing.T) {
	fw := &failWriter{}
	w := bufio.NewWriterSize(fw, 16)
	err := writeMessage(w, strings.NewReader(strings.Repeat("line\r\n", 10000)), allLines)
	if err == nil {
		t.Fatal("no error from a failing writer")
	}
	if fw.n != 1 {
		t.Errorf("%d writes after the first error, want 1", fw.n)
	}
}
