package blackbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// mboxMessages reads the corpus mailbox mailbox-<size>.mbox (the test
// corpus has "1k": a mailing list of 1,000 messages, mboxrd, LF line
// endings; see testdata/corpus/README.md) and returns its messages in file order with CRLF line endings,
// the From_ separator dropped and mboxrd quoting (">From " lines) undone.
// The reader is written here rather than taken from internal/mailimport so
// that a bug there cannot hide one in the server.
func mboxMessages(t *testing.T, size string) [][]byte {
	t.Helper()
	msgs, _ := mboxEntries(t, size)
	return msgs
}

// mboxEntries is mboxMessages with the date of each message's From_
// line (UTC, as the corpus writes it).
func mboxEntries(t *testing.T, size string) ([][]byte, []time.Time) {
	t.Helper()
	path := filepath.Join(corpusDir(t), "mailbox", "mailbox-"+size+".mbox")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("corpus mailbox: %v", err)
	}
	msgs, froms := splitMboxrd(b)
	if len(msgs) == 0 {
		t.Fatalf("%s: no messages", path)
	}
	dates := make([]time.Time, len(froms))
	for i, f := range froms {
		// "From addr Sat Feb 24 10:21:36 1996": the last five fields.
		fs := strings.Fields(f)
		if len(fs) < 5 {
			t.Fatalf("%s: From_ line %q", path, f)
		}
		d, err := time.Parse(time.ANSIC, strings.Join(fs[len(fs)-5:], " "))
		if err != nil {
			t.Fatalf("%s: From_ line %q: %v", path, f, err)
		}
		dates[i] = d
	}
	return msgs, dates
}

var mboxrdQuoted = regexp.MustCompile(`^>+From `)

// splitMboxrd splits an mboxrd file: a message starts at a "From " line
// at the start of the file or after an empty line, and ends with the
// empty line the writer added after it. It returns the messages and their
// From_ lines.
func splitMboxrd(b []byte) (msgs [][]byte, froms []string) {
	var cur []byte
	in := false
	prevEmpty := true
	flush := func() {
		if in {
			cur = bytes.TrimSuffix(cur, []byte("\r\n")) // the separating empty line
			msgs = append(msgs, cur)
		}
	}
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		b = rest
		if bytes.HasPrefix(line, []byte("From ")) && prevEmpty {
			flush()
			froms = append(froms, string(line))
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
	return msgs, froms
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

// TestMboxReader checks splitMboxrd against the mailbox's index (written
// by the corpus generator, not by a reader): the count, and each message's
// date, size (without mboxrd quoting, LF line endings) and Message-ID.
func TestMboxReader(t *testing.T) {
	t.Parallel()
	msgs, dates := mboxEntries(t, "1k")
	index, err := os.ReadFile(filepath.Join(corpusDir(t), "mailbox", "mailbox-1k.index.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(index)), "\n")[1:]
	if len(msgs) != len(rows) || len(dates) != len(rows) {
		t.Fatalf("mailbox-1k.mbox: %d messages, %d dates, the index has %d", len(msgs), len(dates), len(rows))
	}
	for i, row := range rows {
		f := strings.Split(row, "\t")
		lf := bytes.ReplaceAll(msgs[i], []byte("\r\n"), []byte("\n"))
		if got := dates[i].Format(time.RFC3339); got != f[1] || fmt.Sprint(len(lf)) != f[2] ||
			headerValue(msgs[i], "Message-ID") != f[3] {
			t.Fatalf("message %d: date %s, %d bytes, Message-ID %q; index: %q", i+1, got, len(lf), headerValue(msgs[i], "Message-ID"), row)
		}
	}
}
