package blackbox

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestDeliveryRoundTrip sends real corpus messages (and a synthetic one
// with dot-stuffing and 8-bit text) with Python's smtplib to three local
// accounts and an alias that expands to two more, then reads every
// mailbox back with a different client and checks each message is
// byte-identical apart from the trace fields the server prepends.
func TestDeliveryRoundTrip(t *testing.T) {
	t.Parallel()
	python := requireTool(t, "python3")
	// Not about spam: corpus spam must not be refused at DATA (the
	// shipped base model knows it) before it is read back.
	srv := NewServer(t, "[spam]\nenabled = false\n")
	users := srv.AddAccounts("alice", "bob", "carol", "dave", "erin")
	srv.Admin("alias", "add", "team@"+testDomain, users[3], users[4])
	srv.Start()

	msgs := corpusSample(t, 3, 128<<10)
	msgs["synthetic/tricky"] = trickyMessage("roundtrip-tricky")
	eightBit := 0
	dir := t.TempDir()
	var files []string
	for name, m := range msgs {
		p := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
		if err := os.WriteFile(p, m, 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
		if has8bit(m) {
			eightBit++
		}
	}
	sort.Strings(files)
	if eightBit < 2 {
		t.Fatalf("the sample has %d 8-bit messages, want a corpus one besides the synthetic one", eightBit)
	}
	rcpts := strings.Join([]string{users[0], users[1], users[2], "team@" + testDomain}, ",")
	args := append([]string{pyScript(), "send", "--smtp", srv.SMTP, "--sender", "sender@example.org", "--to", rcpts}, files...)
	out := runTool(t, 2*time.Minute, "", nil, python, args...)
	t.Logf("smtplib: sent %d messages (%d with 8-bit octets):\n%s", len(msgs), eightBit, out)

	t.Run("imaplib", func(t *testing.T) {
		outDir := t.TempDir()
		runTool(t, 2*time.Minute, "", nil, python, pyScript(), "fetch", "--imap", srv.IMAP,
			"--user", users[0], "--password", testPassword, "--out", outDir)
		reportMismatch(t, users[0], readFiles(t, outDir), msgs, "\r\n")
	})
	t.Run("imapclient-alias", func(t *testing.T) {
		for _, u := range users[3:] {
			c := imapLogin(t, srv.IMAP, u, nil)
			reportMismatch(t, u, fetchAll(t, c, "INBOX"), msgs, "\r\n")
		}
	})
	t.Run("mbsync", func(t *testing.T) {
		got := mbsyncInbox(t, srv, users[1])
		reportMismatch(t, users[1], got, lfAll(msgs), "\n")
	})
	t.Run("mutt", func(t *testing.T) {
		got := muttCopyInbox(t, srv, users[2])
		reportMismatch(t, users[2], got, lfAll(msgs), "\n")
	})
}

// pyScript is the path of test/py/roundtrip.py.
func pyScript() string { return filepath.Join(repoRoot(), "test", "py", "roundtrip.py") }

// reportMismatch fails the test for each difference between the delivered
// and the sent messages.
func reportMismatch(t *testing.T, user string, got, want map[string][]byte, eol string) {
	t.Helper()
	for _, err := range matchAll(got, want, eol) {
		t.Errorf("%s: %v", user, err)
	}
	if !t.Failed() {
		t.Logf("%s: all %d messages byte-identical after the trace fields", user, len(want))
	}
}

// readFiles returns the regular files of dir keyed by name.
func readFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// readMaildir returns the messages in a Maildir's new/ and cur/.
func readMaildir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, sub := range []string{"new", "cur"} {
		p := filepath.Join(dir, sub)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("Maildir %s: %v", dir, err)
		}
		for name, b := range readFiles(t, p) {
			out[sub+"/"+name] = b
		}
	}
	return out
}

func lfAll(msgs map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(msgs))
	for k, v := range msgs {
		out[k] = toLF(v)
	}
	return out
}
