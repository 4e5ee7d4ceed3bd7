package blackbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestInteropNeomuttQRESYNC: Debian's NeoMutt with its header cache and
// imap_condstore/imap_qresync (RFC 7162) opens INBOX, another client
// flags two messages, expunges one and appends a flagged one, and NeoMutt
// opens INBOX again from its cache: it resynchronises with ENABLE
// QRESYNC, SELECT (CONDSTORE) and UID FETCH … (CHANGEDSINCE m VANISHED),
// and the messages it then shows as flagged are exactly the flagged ones.
func TestInteropNeomuttQRESYNC(t *testing.T) {
	requireTool(t, "neomutt")
	srv := NewServer(t, "")
	user := srv.AddAccounts("neomutt")[0]
	srv.Start()
	var msgs [][]byte
	for i := 1; i <= 10; i++ {
		msgs = append(msgs, []byte(fmt.Sprintf("From: a@test.local\r\nSubject: msg %02d\r\nMessage-ID: <m%d@test.local>\r\n\r\nbody %d\r\n", i, i, i)))
	}
	appendAll(t, srv, user, "INBOX", msgs)
	dir := t.TempDir()
	cache := filepath.Join(dir, "hcache") + "/"
	if got := neomuttPipe(t, srv, user, cache, "~A", filepath.Join(dir, "log1")); len(got) != 10 {
		t.Fatalf("first NeoMutt run piped %d messages, want 10", len(got))
	}

	ic, err := rawIMAPLogin(srv.IMAP, user)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"SELECT INBOX", `STORE 3,5 +FLAGS (\Flagged)`, `STORE 7 +FLAGS (\Deleted)`, "EXPUNGE"} {
		if st, _, err := ic.command(fmt.Sprintf("c%d", i), c); err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("%s: %q %v", c, st, err)
		}
	}
	if st, err := ic.appendMsg("a", `INBOX (\Flagged)`, []byte("From: a@test.local\r\nSubject: msg new\r\n\r\nnew\r\n")); err != nil || !strings.HasPrefix(st, "OK") {
		t.Fatalf("APPEND: %q %v", st, err)
	}
	ic.c.Close()

	log2 := filepath.Join(dir, "log2")
	got := neomuttPipe(t, srv, user, cache, "~F", log2)
	var subjects []string
	for _, m := range got {
		for _, l := range strings.Split(string(m), "\n") {
			if s, ok := strings.CutPrefix(l, "Subject: "); ok {
				subjects = append(subjects, s)
			}
		}
	}
	slices.Sort(subjects)
	if want := []string{"msg 03", "msg 05", "msg new"}; !slices.Equal(subjects, want) {
		t.Errorf("flagged after the resync: %q, want %q", subjects, want)
	}
	trace := readLogs(t, log2)
	for _, want := range []string{"ENABLE QRESYNC", `SELECT "INBOX" (CONDSTORE)`, "(CHANGEDSINCE ", "VANISHED)", "* VANISHED (EARLIER) 7"} {
		if !strings.Contains(trace, want) {
			t.Errorf("NeoMutt's second session has no %q:\n%s", want, clip(trace, 4000))
		}
	}
}

// neomuttPipe runs NeoMutt on user's INBOX with a header cache and
// CONDSTORE/QRESYNC on, pipes the messages matching pattern, raw, into
// files and quits; NeoMutt logs its IMAP traffic into logPath.
func neomuttPipe(t *testing.T, srv *Server, user, cache, pattern, logPath string) map[string][]byte {
	t.Helper()
	neomutt := requireTool(t, "neomutt")
	dir := t.TempDir()
	out := filepath.Join(dir, "piped")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	rc := muttPipeRC(user, srv.IMAP, fmt.Sprintf("set imap_condstore = yes\nset imap_qresync = yes\nset header_cache = \"%s\"", cache), pattern, out)
	rcPath := filepath.Join(dir, "neomuttrc")
	if err := os.WriteFile(rcPath, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	runInTerminal(t, dir, fmt.Sprintf("%s -n -F %s -d 5 -l %s -f imap://%s/INBOX", neomutt, rcPath, logPath, srv.IMAP))
	return readFiles(t, out)
}

// readLogs returns NeoMutt's debug logs (it numbers them: log0, log1 …).
func readLogs(t *testing.T, logPath string) string {
	t.Helper()
	files, err := filepath.Glob(logPath + "*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no NeoMutt log at %s: %v", logPath, err)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}
