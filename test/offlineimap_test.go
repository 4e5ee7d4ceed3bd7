package blackbox

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
)

// offlineimapRC is an offlineimap (offlineimap3, Debian) configuration
// that syncs the account's INBOX with dir/mail/INBOX over implicit TLS
// (RFC 8314), checking pimail's self-signed certificate against the copy
// in the data directory: offlineimap's own check wants a DNS name of the
// certificate, hence "localhost" (forced to IPv4, where the server
// listens).
func offlineimapRC(dir, imaps, user, caFile string) string {
	_, port, _ := net.SplitHostPort(imaps)
	return fmt.Sprintf(`[general]
accounts = test
metadata = %[1]s/meta
maxsyncaccounts = 1

[Account test]
localrepository = local
remoterepository = remote

[Repository local]
type = Maildir
localfolders = %[1]s/mail

[Repository remote]
type = IMAP
remotehost = localhost
ipv6 = no
remoteport = %[2]s
remoteuser = %[3]s
remotepass = %[4]s
ssl = yes
sslcacertfile = %[5]s
folderfilter = lambda f: f == 'INBOX'
expunge = yes
maxconnections = 1
`, dir, port, user, testPassword, caFile)
}

// TestInteropOfflineimap syncs the 1k corpus mailbox (linux-mips list,
// real messages) between pimail and a local Maildir with offlineimap over
// IMAPS: every message arrives byte for byte; flags changed on either
// side, a message deleted on either side and a message added on either
// side propagate on the second sync; a third sync changes nothing.
func TestInteropOfflineimap(t *testing.T) {
	t.Parallel()
	offlineimap := requireTool(t, "offlineimap")
	srv := NewServer(t, "")
	user := srv.AddAccounts("offline")[0]
	l := withListeners(t, "imaps")
	srv.StartWith(l)
	msgs, skipped := syncMessages(t, "1k")
	t.Logf("%d messages from mailbox-1k.mbox (%d left out: NUL or bare CR)", len(msgs), skipped)
	appendAll(t, srv, user, "INBOX", msgs)

	dir := t.TempDir()
	maildir := filepath.Join(dir, "mail", "INBOX")
	rcPath := filepath.Join(dir, "offlineimaprc")
	ca := filepath.Join(srv.Data, "tls", "self-signed.crt")
	if err := os.WriteFile(rcPath, []byte(offlineimapRC(dir, l.IMAPS, user, ca)), 0o600); err != nil {
		t.Fatal(err)
	}
	sync := func(what string) string {
		t.Helper()
		t0 := time.Now()
		// -o: one sync, -u basic: plain log lines, -l: a log file to
		// show on failure (the exit status is non-zero on any error).
		out, err := runToolErr(5*time.Minute, dir, []string{"HOME=" + dir}, offlineimap,
			"-c", rcPath, "-o", "-u", "basic")
		if err != nil || bytes.Contains(out, []byte("ERROR")) {
			t.Fatalf("offlineimap (%s): %v\n%s\nserver log:\n%s", what, err, clip(string(out), 6000), clip(srv.Logs(), 4000))
		}
		t.Logf("offlineimap (%s) in %v", what, time.Since(t0).Round(time.Millisecond))
		return string(out)
	}

	// 1. Everything comes down. The server must hold every message byte
	// for byte; offlineimap stores what Python's email package makes of
	// it, with LF endings: the original's bytes for nearly all, and for
	// the rest exactly what that package's round trip gives (checked with
	// test/py/emailrewrite.py), so no change can come from the server.
	sync("initial")
	c := imapLogin(t, srv.IMAP, user, nil)
	onServer := map[string][]byte{}
	for _, b := range fetchAll(t, c, "INBOX") {
		onServer[interopID(b)] = b
	}
	got := readMaildir(t, maildir)
	if len(got) != len(msgs) || len(onServer) != len(msgs) {
		t.Fatalf("Maildir has %d messages, the server %d, want %d", len(got), len(onServer), len(msgs))
	}
	byID := map[string][]byte{}
	for _, b := range got {
		byID[interopID(b)] = b
	}
	rewritten := map[string][]byte{}
	for i, m := range msgs {
		id := fmt.Sprint(i)
		if !bytes.Equal(onServer[id], m) {
			t.Errorf("message %d differs on the server (%d bytes, want %d): %s", i, len(onServer[id]), len(m), firstDiff(onServer[id], m))
		}
		if !bytes.Equal(byID[id], toLF(m)) {
			rewritten[id] = m
		}
	}
	for id, want := range emailRewrite(t, rewritten) {
		if !bytes.Equal(byID[id], want) {
			t.Errorf("message %s differs in the Maildir (%d bytes, want %d): %s", id, len(byID[id]), len(want), firstDiff(byID[id], want))
		}
	}
	t.Logf("%d of %d messages byte-identical in the Maildir, %d as Python's email package rewrites them", len(msgs)-len(rewritten), len(msgs), len(rewritten))
	if len(rewritten) > len(msgs)/100 {
		t.Errorf("%d messages rewritten by offlineimap: more than 1 %%, suspicious", len(rewritten))
	}
	if t.Failed() {
		t.FailNow()
	}
	remote := serverFlags(t, c)
	_, local := localState(t, maildir)
	for id, f := range remote {
		if f != "" || local[id] != "" {
			t.Errorf("message %s after the first sync: flags %q on the server, %q in the Maildir, want none", id, f, local[id])
		}
	}

	// 2. Changes on both sides, on different messages: flags, a
	// deletion and a new message on each.
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	uidsOf := func(ids ...int) imap.UIDSet {
		var s imap.UIDSet
		for _, id := range ids {
			s.AddNum(imap.UID(id + 1)) // APPENDed in order into a new mailbox
		}
		return s
	}
	store := func(uids imap.UIDSet, op imap.StoreFlagsOp, flags ...imap.Flag) {
		t.Helper()
		if err := c.Store(uids, &imap.StoreFlags{Op: op, Silent: true, Flags: flags}, nil).Close(); err != nil {
			t.Fatalf("UID STORE %v: %v", uids, err)
		}
	}
	store(uidsOf(0, 1, 2), imap.StoreFlagsAdd, imap.FlagFlagged)
	store(uidsOf(3, 4), imap.StoreFlagsAdd, imap.FlagSeen, imap.FlagAnswered)
	store(uidsOf(30), imap.StoreFlagsAdd, imap.FlagDeleted)
	if err := c.UIDExpunge(uidsOf(30)).Close(); err != nil {
		t.Fatalf("UID EXPUNGE: %v", err)
	}
	fromServer := []byte("X-Interop-ID: server-new\r\nFrom: a@test.local\r\nSubject: new on the server\r\n\r\nhello\r\n")
	appendAll(t, srv, user, "INBOX", [][]byte{fromServer})

	paths, _ := localState(t, maildir)
	setLocalFlags(t, maildir, paths["10"], "S")
	setLocalFlags(t, maildir, paths["11"], "FS")
	setLocalFlags(t, maildir, paths["12"], "R")
	if err := os.Remove(paths["20"]); err != nil {
		t.Fatal(err)
	}
	fromClient := "X-Interop-ID: client-new\nFrom: b@test.local\nTo: offline@test.local\nSubject: new in the Maildir\n" +
		"Date: Sun, 22 Nov 2026 07:00:00 +0000\nMessage-ID: <client-new@offlineimap.test>\n\nhello from offlineimap\n"
	if err := os.WriteFile(filepath.Join(maildir, "new", "1700000000.interop.local"), []byte(fromClient), 0o600); err != nil {
		t.Fatal(err)
	}
	sync("changes on both sides")

	want := map[string]string{
		"0": `\Flagged`, "1": `\Flagged`, "2": `\Flagged`,
		"3": `\Answered \Seen`, "4": `\Answered \Seen`,
		"10": `\Seen`, "11": `\Flagged \Seen`, "12": `\Answered`,
		"5": "", "client-new": "", "server-new": "",
	}
	remote = serverFlags(t, c)
	_, local = localState(t, maildir)
	if n := len(msgs); len(remote) != n || len(local) != n {
		// Two deleted, two added.
		t.Errorf("after the second sync: %d messages on the server, %d in the Maildir, want %d", len(remote), len(local), n)
	}
	for id, w := range want {
		if r, ok := remote[id]; !ok || r != w {
			t.Errorf("message %s on the server: flags %q (present %v), want %q", id, r, ok, w)
		}
		if l, ok := local[id]; !ok || l != w {
			t.Errorf("message %s in the Maildir: flags %q (present %v), want %q", id, l, ok, w)
		}
	}
	for _, id := range []string{"20", "30"} {
		if f, ok := remote[id]; ok {
			t.Errorf("message %s (deleted on one side) is still on the server, flags %q", id, f)
		}
		if _, ok := local[id]; ok {
			t.Errorf("message %s (deleted on one side) is still in the Maildir", id)
		}
	}
	// The local deletion must be expunged, not only flagged \Deleted.
	for id, f := range remote {
		if strings.Contains(f, `\Deleted`) {
			t.Errorf("message %s is left on the server flagged \\Deleted", id)
		}
	}
	all := fetchAll(t, c, "INBOX")
	found := false
	for _, b := range all {
		if interopID(b) == "client-new" {
			found = true
			if string(toLF(b)) != fromClient {
				t.Errorf("the message from the Maildir arrived as %q", clip(string(b), 400))
			}
		}
	}
	if !found {
		t.Error("the message added to the Maildir is not on the server")
	}
	for _, b := range readMaildir(t, maildir) {
		if interopID(b) == "server-new" && !bytes.Equal(b, toLF(fromServer)) {
			t.Errorf("the message added on the server arrived in the Maildir as %q", clip(string(b), 400))
		}
	}

	// 3. Nothing left to do: a third sync changes nothing on either side.
	sync("idempotent")
	if again := serverFlags(t, c); !mapsEqual(again, remote) {
		t.Error("a third sync changed flags on the server")
	}
	if _, again := localState(t, maildir); !mapsEqual(again, local) {
		t.Error("a third sync changed the Maildir")
	}
}

// firstDiff describes where two byte strings first differ.
func firstDiff(got, want []byte) string {
	n := min(len(got), len(want))
	i := 0
	for i < n && got[i] == want[i] {
		i++
	}
	lo := max(0, i-40)
	return fmt.Sprintf("at byte %d: got %q, want %q", i, got[lo:min(len(got), i+60)], want[lo:min(len(want), i+60)])
}

// emailRewrite returns, keyed like msgs, what offlineimap stores for each
// message (CRLF, as fetched): test/py/emailrewrite.py's output.
func emailRewrite(t *testing.T, msgs map[string][]byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if len(msgs) == 0 {
		return out
	}
	python := requireTool(t, "python3")
	dir := t.TempDir()
	for id, m := range msgs {
		if err := os.WriteFile(filepath.Join(dir, id+".eml"), m, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(repoRoot(), "test", "py", "emailrewrite.py")
	runTool(t, time.Minute, dir, nil, python, script, dir)
	for id := range msgs {
		b, err := os.ReadFile(filepath.Join(dir, id+".out"))
		if err != nil {
			t.Fatal(err)
		}
		out[id] = b
	}
	return out
}
