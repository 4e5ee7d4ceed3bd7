package blackbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// mboxMessages reads the corpus mailbox mailbox-<size>.mbox ("1k", "9k"
// or "21k": the linux-mips list, mboxrd, LF line endings; see the corpus
// README) and returns its messages in file order with CRLF line endings,
// the From_ separator dropped and mboxrd quoting (">From " lines) undone.
// The reader is written here rather than taken from internal/mailimport so
// that a bug there cannot hide one in the server.
func mboxMessages(t *testing.T, size string) [][]byte {
	t.Helper()
	path := filepath.Join(corpusDir(t), "mailbox", "mailbox-"+size+".mbox")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("corpus mailbox: %v", err)
	}
	msgs := splitMboxrd(b)
	if len(msgs) == 0 {
		t.Fatalf("%s: no messages", path)
	}
	return msgs
}

var mboxrdQuoted = regexp.MustCompile(`^>+From `)

// splitMboxrd splits an mboxrd file: a message starts at a "From " line
// at the start of the file or after an empty line, and ends with the
// empty line the writer added after it.
func splitMboxrd(b []byte) [][]byte {
	var out [][]byte
	var cur []byte
	in := false
	prevEmpty := true
	flush := func() {
		if in {
			cur = bytes.TrimSuffix(cur, []byte("\r\n")) // the separating empty line
			out = append(out, cur)
		}
	}
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		b = rest
		if bytes.HasPrefix(line, []byte("From ")) && prevEmpty {
			flush()
			cur, in, prevEmpty = nil, true, false
			continue
		}
		prevEmpty = len(line) == 0
		if mboxrdQuoted.Match(line) {
			line = line[1:]
		}
		cur = append(append(cur, line...), '\r', '\n')
	}
	flush()
	return out
}

// syncMessages returns the messages of mailbox-<size>.mbox that a
// Maildir client can store byte for byte (no NUL, no bare CR), each
// with an "X-Interop-ID: <i>" field prepended so both sides of a sync
// can name it, and how many it left out.
func syncMessages(t *testing.T, size string) ([][]byte, int) {
	t.Helper()
	var out [][]byte
	skipped := 0
	for _, m := range mboxMessages(t, size) {
		if bytes.IndexByte(m, 0) >= 0 || bytes.Count(m, []byte("\r")) != bytes.Count(m, []byte("\r\n")) {
			skipped++
			continue
		}
		out = append(out, append([]byte(fmt.Sprintf("X-Interop-ID: %d\r\n", len(out))), m...))
	}
	return out, skipped
}

// appendInteropIDs appends more (each starting with an X-Interop-ID
// field, as interopMessages makes them) to msgs, renumbering their IDs to
// follow those of msgs.
func appendInteropIDs(msgs, more [][]byte) [][]byte {
	for _, m := range more {
		_, rest, _ := bytes.Cut(m, []byte("\r\n"))
		msgs = append(msgs, append([]byte(fmt.Sprintf("X-Interop-ID: %d\r\n", len(msgs))), rest...))
	}
	return msgs
}

// TestMboxReader checks splitMboxrd on the message counts the corpus
// README gives for the 1k mailbox.
func TestMboxReader(t *testing.T) {
	if n := len(mboxMessages(t, "1k")); n != 1046 {
		t.Errorf("mailbox-1k.mbox: %d messages, want 1,046", n)
	}
}
