package blackbox

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// corpusDir is the shared mail corpus: $PIMAIL_CORPUS, else ../shared/corpus
// beside the repository (where CI puts it).
func corpusDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PIMAIL_CORPUS")
	if dir == "" {
		dir = filepath.Join(filepath.Dir(repoRoot()), "shared", "corpus")
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.tsv")); err != nil {
		t.Fatalf("mail corpus not found (set PIMAIL_CORPUS): %v", err)
	}
	return dir
}

// corpusSample picks n messages per folder (ham, spam, edge) at evenly
// spaced positions in name order, plus one with 8-bit octets, keeping only those SMTP can carry
// unchanged: no NUL, no bare CR, lines of at most 998 octets (RFC 5321
// §4.5.3.1.6), a header/body separator, and at most maxSize bytes. The
// messages are returned with CRLF line endings, keyed by their file name.
func corpusSample(t *testing.T, n, maxSize int) map[string][]byte {
	t.Helper()
	root := corpusDir(t)
	out := map[string][]byte{}
	for _, folder := range []string{"ham", "spam", "edge"} {
		names, err := filepath.Glob(filepath.Join(root, folder, "*.eml"))
		if err != nil || len(names) == 0 {
			t.Fatalf("corpus folder %s: %d files, %v", folder, len(names), err)
		}
		sort.Strings(names)
		picked := 0
		step := max(1, len(names)/(3*n))
		for i := 0; i < len(names) && picked < n; i += step {
			b, err := os.ReadFile(names[i])
			if err != nil {
				t.Fatal(err)
			}
			msg := toCRLF(b)
			if len(msg) > maxSize || !smtpSafe(msg) {
				continue
			}
			out[folder+"/"+filepath.Base(names[i])] = msg
			picked++
		}
		if picked < n {
			t.Fatalf("corpus folder %s: only %d of %d usable messages", folder, picked, n)
		}
	}
	name, msg := corpus8bit(t, root)
	out[name] = msg
	return out
}

// corpus8bit returns the first spam message (in name order) with 8-bit
// octets that SMTP can carry unchanged.
func corpus8bit(t *testing.T, root string) (string, []byte) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "spam", "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if msg := toCRLF(b); has8bit(msg) && smtpSafe(msg) {
			return "spam/" + filepath.Base(p), msg
		}
	}
	t.Fatal("no usable 8-bit message in the corpus")
	return "", nil
}

// smtpSafe reports whether msg (CRLF) crosses SMTP byte for byte.
func smtpSafe(msg []byte) bool {
	if bytes.IndexByte(msg, 0) >= 0 || !bytes.Contains(msg, []byte("\r\n\r\n")) {
		return false
	}
	for _, line := range bytes.Split(msg, []byte("\r\n")) {
		if len(line) > 998 || bytes.IndexByte(line, '\r') >= 0 {
			return false
		}
	}
	// The first line must be a header field (not an mbox "From " line).
	first, _, _ := bytes.Cut(msg, []byte("\r\n"))
	name, _, ok := bytes.Cut(first, []byte(":"))
	return ok && len(name) > 0 && bytes.IndexAny(name, " \t") < 0
}

// has8bit reports whether msg has octets above 127.
func has8bit(msg []byte) bool {
	for _, c := range msg {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// trickyMessage is a synthetic message that exercises dot-stuffing, lines
// beginning with "From ", 8-bit text, a long folded header and an empty
// last line.
func trickyMessage(id string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Tester <tester@example.org>\r\n")
	fmt.Fprintf(&b, "To: team@test.local\r\n")
	fmt.Fprintf(&b, "Subject: tricky %s\r\n", id)
	fmt.Fprintf(&b, "Message-ID: <%s@blackbox.test>\r\n", id)
	fmt.Fprintf(&b, "Date: Mon, 02 Jan 2006 15:04:05 +0000\r\n")
	fmt.Fprintf(&b, "X-Long: %s\r\n", strings.Repeat("folded header text ", 5)+"\r\n\t"+strings.Repeat("more ", 20))
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\n")
	fmt.Fprintf(&b, "Content-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString(".\r\n..\r\n.leading dot\r\nFrom the start of a line\r\n>From quoted\r\n")
	b.WriteString("Grüße aus Köln — 8-bit UTF-8 text\r\n\t tab and trailing space \r\n\r\n")
	return []byte(b.String())
}

// generatedMessage builds a deterministic message of about size bytes
// with a unique Message-ID and Subject; body lines are random letters so
// corruption anywhere shows.
func generatedMessage(tag string, n, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: Bench <sender@example.org>\r\n")
	fmt.Fprintf(&b, "To: <rcpt@test.local>\r\n")
	fmt.Fprintf(&b, "Subject: %s %d\r\n", tag, n)
	fmt.Fprintf(&b, "Message-ID: <%s-%d@blackbox.test>\r\n", tag, n)
	fmt.Fprintf(&b, "Date: Mon, 02 Jan 2006 15:04:05 +0000\r\n\r\n")
	rng := rand.New(rand.NewPCG(uint64(n), uint64(len(tag))))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	line := make([]byte, 76)
	for b.Len() < size {
		for i := range line {
			line[i] = letters[rng.IntN(len(letters))]
		}
		b.Write(line)
		b.WriteString("\r\n")
	}
	return b.Bytes()
}
