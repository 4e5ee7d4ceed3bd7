package smtpd

import (
	"bytes"
	"net/smtp"
	"os"
	"path/filepath"
	"testing"

	"pimail/internal/testcorpus"
)

// Real mail, including the corpus messages with lines far beyond RFC 5321's
// 1000 octets, goes through net/smtp (which sends CRLF line endings).
func TestCorpusMessages(t *testing.T) {
	root, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, dir := range []string{"ham", "spam"} {
		m, _ := filepath.Glob(filepath.Join(root, dir, "*.eml"))
		for i := 0; i < len(m) && i < 2000; i += 13 { // a spread-out sample
			files = append(files, m[i])
		}
	}
	long := longLineFiles(t, root)
	if len(long) == 0 && len(files) > 0 {
		t.Fatal("no corpus message with long lines found")
	}
	files = append(files, long...)
	if len(files) == 0 {
		t.Fatal("no corpus messages")
	}
	e := newEnv(t, Config{})
	cl, err := smtp.Dial(e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Mail("sender@remote.test"); err != nil {
			t.Fatalf("%s: MAIL: %v", f, err)
		}
		if err := cl.Rcpt("dave@example.com"); err != nil {
			t.Fatalf("%s: RCPT: %v", f, err)
		}
		w, err := cl.Data()
		if err != nil {
			t.Fatalf("%s: DATA: %v", f, err)
		}
		if _, err := w.Write(raw); err != nil {
			t.Fatalf("%s: write: %v", f, err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("%s: end of data: %v", f, err)
		}
	}
	got := e.inbox(t, "dave@example.com")
	if len(got) != len(files) {
		t.Fatalf("stored %d of %d messages", len(got), len(files))
	}
	for i, f := range files {
		raw, _ := os.ReadFile(f)
		want := bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))
		if !bytes.HasSuffix(want, []byte("\r\n")) {
			want = append(want, '\r', '\n')
		}
		if !bytes.HasSuffix([]byte(got[i]), want) {
			t.Errorf("%s: stored message differs from the original", filepath.Base(f))
		}
	}
}

// longLineFiles names the corpus messages known to have very long lines.
func longLineFiles(t *testing.T, root string) []string {
	var out []string
	for _, dir := range []string{"ham", "spam"} {
		m, _ := filepath.Glob(filepath.Join(root, dir, "*.eml"))
		for _, f := range m {
			if len(out) >= 5 {
				return out
			}
			st, err := os.Stat(f)
			if err != nil || st.Size() < 40<<10 {
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			longest, cur := 0, 0
			for _, b := range raw {
				if b == '\n' {
					cur = 0
					continue
				}
				cur++
				longest = max(longest, cur)
			}
			if longest > 4000 {
				out = append(out, f)
			}
		}
	}
	return out
}
