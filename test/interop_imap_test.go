package blackbox

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// interopMessages returns about n real messages from the corpus, each
// with an "X-Interop-ID: <i>" field prepended so that both sides of a
// sync can name it, in a fixed order.
func interopMessages(t *testing.T, n int) [][]byte {
	t.Helper()
	sample := corpusSample(t, n/3, 64<<10)
	names := make([]string, 0, len(sample))
	for k := range sample {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([][]byte, len(names))
	for i, k := range names {
		out[i] = append([]byte(fmt.Sprintf("X-Interop-ID: %d\r\n", i)), sample[k]...)
	}
	return out
}

// appendAll APPENDs msgs to mailbox over a raw connection.
func appendAll(t *testing.T, srv *Server, user, mailbox string, msgs [][]byte) {
	t.Helper()
	ic, err := rawIMAPLogin(srv.IMAP, user)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.c.Close()
	for i, m := range msgs {
		if st, err := ic.appendMsg(fmt.Sprintf("A%d", i), mailbox, m); err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("APPEND %d: %q %v", i, st, err)
		}
	}
}

// interopID returns the X-Interop-ID of a message, or "".
func interopID(msg []byte) string {
	for _, l := range bytes.Split(msg, []byte("\n")) {
		l = bytes.TrimRight(l, "\r")
		if len(l) == 0 {
			break
		}
		if v, ok := bytes.CutPrefix(l, []byte("X-Interop-ID: ")); ok {
			return string(v)
		}
	}
	return ""
}

// serverFlags returns the flags of every message of INBOX keyed by its
// X-Interop-ID, as a sorted, space-separated string.
func serverFlags(t *testing.T, c *imapclient.Client) map[string]string {
	t.Helper()
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	hdr := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"X-Interop-ID"}}
	var all imap.SeqSet
	all.AddRange(1, 0)
	msgs, err := c.Fetch(all, &imap.FetchOptions{Flags: true, BodySection: []*imap.FetchItemBodySection{hdr}}).Collect()
	if err != nil {
		t.Fatalf("FETCH FLAGS: %v", err)
	}
	out := map[string]string{}
	for _, m := range msgs {
		var fl []string
		for _, f := range m.Flags {
			fl = append(fl, string(f))
		}
		slices.Sort(fl)
		out[interopID(m.FindBodySection(hdr))] = strings.Join(fl, " ")
	}
	return out
}

// maildirFlags maps Maildir info letters (the "2," part of a file name,
// as mbsync writes it) to IMAP flags.
var maildirFlags = map[byte]string{'D': `\Draft`, 'F': `\Flagged`, 'R': `\Answered`, 'S': `\Seen`, 'T': `\Deleted`}

// localState returns, keyed by X-Interop-ID, each message file's path
// and its flags as IMAP flags (sorted, space separated).
func localState(t *testing.T, maildir string) (paths, flags map[string]string) {
	t.Helper()
	paths, flags = map[string]string{}, map[string]string{}
	for name, b := range readMaildir(t, maildir) {
		id := interopID(b)
		paths[id] = filepath.Join(maildir, name)
		var fl []string
		if _, info, ok := strings.Cut(filepath.Base(name), ":2,"); ok {
			for i := range len(info) {
				if f, ok := maildirFlags[info[i]]; ok {
					fl = append(fl, f)
				}
			}
		}
		slices.Sort(fl)
		flags[id] = strings.Join(fl, " ")
	}
	return paths, flags
}

// setLocalFlags renames a message file into cur/ with the given Maildir
// info letters (sorted, as the Maildir convention wants).
func setLocalFlags(t *testing.T, maildir, path, letters string) {
	t.Helper()
	base, _, _ := strings.Cut(filepath.Base(path), ":2,")
	l := []byte(letters)
	slices.Sort(l)
	if err := os.Rename(path, filepath.Join(maildir, "cur", base+":2,"+string(l))); err != nil {
		t.Fatal(err)
	}
}

// TestInteropMbsyncBothWays syncs a mailbox of real messages (the 1k
// corpus mailbox, 1,046 linux-mips list messages, plus about 300 ham,
// spam and edge-case messages) with mbsync in both directions: the first
// sync copies all of them, flag changes made on either side and new
// messages on either side propagate on the second, and a third finds
// nothing to do.
func TestInteropMbsyncBothWays(t *testing.T) {
	t.Parallel()
	mbsync := requireTool(t, "mbsync")
	srv := NewServer(t, "")
	user := srv.AddAccounts("sync")[0]
	srv.Start()
	msgs, skipped := syncMessages(t, "1k")
	msgs = appendInteropIDs(msgs, interopMessages(t, 300))
	t.Logf("%d messages (%d of the 1k mailbox left out: NUL or bare CR)", len(msgs), skipped)
	appendAll(t, srv, user, "INBOX", msgs)

	dir := t.TempDir()
	maildir := filepath.Join(dir, "INBOX")
	host, port, err := net.SplitHostPort(srv.IMAP)
	if err != nil {
		t.Fatal(err)
	}
	// isync 1.4 syntax (Debian 12).
	rc := fmt.Sprintf(`IMAPAccount test
Host %s
Port %s
User %s
Pass %s
SSLType None
AuthMechs LOGIN

IMAPStore remote
Account test

MaildirStore local
Path %s/
Inbox %s

Channel inbox
Far :remote:INBOX
Near :local:INBOX
Create Both
Expunge Both
Sync All
SyncState *
`, host, port, user, testPassword, dir, maildir)
	rcPath := filepath.Join(dir, "mbsyncrc")
	if err := os.WriteFile(rcPath, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	sync := func(what string) string {
		t.Helper()
		t0 := time.Now()
		out, err := runToolErr(3*time.Minute, dir, []string{"HOME=" + dir}, mbsync, "-c", rcPath, "-a")
		if err != nil {
			t.Fatalf("mbsync (%s): %v\n%s\nserver log:\n%s", what, err, clip(string(out), 4000), clip(srv.Logs(), 4000))
		}
		t.Logf("mbsync (%s) in %v: %s", what, time.Since(t0).Round(time.Millisecond), clip(strings.TrimSpace(string(out)), 300))
		return string(out)
	}

	// 1. Everything comes down, byte for byte (LF endings, X-TUID dropped).
	sync("initial")
	got := readMaildir(t, maildir)
	if len(got) != len(msgs) {
		t.Fatalf("Maildir has %d messages, want %d", len(got), len(msgs))
	}
	byID := map[string][]byte{}
	for _, b := range got {
		byID[interopID(b)] = dropTUID(b)
	}
	for i, m := range msgs {
		if want := toLF(m); !bytes.Equal(byID[fmt.Sprint(i)], want) {
			t.Errorf("message %d differs after the sync (%d bytes, want %d)", i, len(byID[fmt.Sprint(i)]), len(want))
		}
	}

	// 2. Change flags on both sides (different messages) and add one new
	// message on each side.
	c := imapLogin(t, srv.IMAP, user, nil)
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
	if err := c.Store(uidsOf(0, 1, 2), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagFlagged}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Store(uidsOf(3, 4), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen, imap.FlagAnswered}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	paths, _ := localState(t, maildir)
	setLocalFlags(t, maildir, paths["10"], "S")
	setLocalFlags(t, maildir, paths["11"], "FS")
	setLocalFlags(t, maildir, paths["12"], "R")
	fromServer := []byte("X-Interop-ID: server-new\r\nFrom: a@test.local\r\nSubject: new on the server\r\n\r\nhello\r\n")
	appendAll(t, srv, user, "INBOX", [][]byte{fromServer})
	// New messages in the Maildir: mbsync uploads them with pipelined
	// APPENDs (isync's PipelineDepth is unlimited by default), which the
	// server stores together.
	const nClient = 12
	fromClient := map[string]string{}
	for i := range nClient {
		id := fmt.Sprintf("client-new-%d", i)
		fromClient[id] = fmt.Sprintf("X-Interop-ID: %s\nFrom: b@test.local\nSubject: new in the Maildir %d\n\nhello from mbsync\n", id, i)
		if err := os.WriteFile(filepath.Join(maildir, "new", fmt.Sprintf("17000000%02d.interop.local", i)), []byte(fromClient[id]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sync("changes on both sides")

	want := map[string]string{
		"0": `\Flagged`, "1": `\Flagged`, "2": `\Flagged`,
		"3": `\Answered \Seen`, "4": `\Answered \Seen`,
		"10": `\Seen`, "11": `\Flagged \Seen`, "12": `\Answered`,
		"5": "", "server-new": "",
	}
	for id := range fromClient {
		want[id] = ""
	}
	remote := serverFlags(t, c)
	_, local := localState(t, maildir)
	if n := len(msgs) + 1 + nClient; len(remote) != n || len(local) != n {
		t.Errorf("after the second sync: %d messages on the server, %d in the Maildir, want %d", len(remote), len(local), n)
	}
	for id, w := range want {
		if remote[id] != w || local[id] != w {
			t.Errorf("message %s: flags %q on the server, %q in the Maildir, want %q", id, remote[id], local[id], w)
		}
	}
	arrived := 0
	for _, b := range fetchAll(t, c, "INBOX") {
		if m, ok := fromClient[interopID(b)]; ok {
			// mbsync adds X-TUID to the header of a message it uploads.
			if string(dropTUID(toLF(b))) != m {
				t.Errorf("the message %s from the Maildir arrived as %q", interopID(b), clip(string(b), 300))
			}
			arrived++
		}
	}
	if arrived != nClient {
		t.Errorf("%d of the %d messages added to the Maildir are on the server", arrived, nClient)
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

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// runMutt runs mutt on user's INBOX under script(1) (mutt needs a
// terminal; see muttCopyInbox) with the base settings plus extra muttrc
// lines (keystrokes via push), and returns its screen output.
func runMutt(t *testing.T, srv *Server, user, extra string) string {
	t.Helper()
	mutt := requireTool(t, "mutt")
	dir := t.TempDir()
	rc := fmt.Sprintf(`set imap_user = "%s"
set imap_pass = "%s"
set folder = "imap://%s/"
set spoolfile = "+INBOX"
set ssl_starttls = no
set ssl_force_tls = no
set imap_passive = yes
set header_cache = ""
set message_cachedir = ""
set record = ""
set wait_key = no
set sleep_time = 0
set mail_check_stats = no
set sort = mailbox-order
set confirmcreate = no
set confirmappend = no
set quit = yes
%s
`, user, testPassword, srv.IMAP, extra)
	rcPath := filepath.Join(dir, "muttrc")
	if err := os.WriteFile(rcPath, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	return runInTerminal(t, dir, fmt.Sprintf("%s -n -F %s -f imap://%s/INBOX", mutt, rcPath, srv.IMAP))
}

// TestInteropMuttReadAndMove has mutt read every message of a mailbox of
// real mail (piped out raw, byte for byte), then, in batch mode, tag ten
// messages by a header pattern and save them to a new folder, which moves
// them: they must be in Archive, unchanged, and gone from INBOX.
func TestInteropMuttReadAndMove(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	user := srv.AddAccounts("mutt")[0]
	srv.Start()
	msgs := interopMessages(t, 90)
	appendAll(t, srv, user, "INBOX", msgs)

	read := muttCopyInbox(t, srv, user)
	if len(read) != len(msgs) {
		t.Errorf("mutt read %d messages, want %d", len(read), len(msgs))
	}
	byID := map[string][]byte{}
	for _, b := range read {
		byID[interopID(b)] = b
	}
	for i, m := range msgs {
		if got, want := byID[fmt.Sprint(i)], toLF(m); !bytes.Equal(got, want) {
			t.Errorf("message %d as mutt read it differs (%d bytes, want %d)", i, len(got), len(want))
		}
	}

	screen := runMutt(t, srv, user, `set delete = yes
set move = no
push "<tag-pattern>~h 'X-Interop-ID: 1[0-9]\$'<enter><tag-prefix><save-message>=Archive<enter><quit>"`)
	c := imapLogin(t, srv.IMAP, user, nil)
	inbox, archive := fetchAll(t, c, "INBOX"), fetchAll(t, c, "Archive")
	moved := map[string]bool{}
	for _, b := range archive {
		id := interopID(b)
		moved[id] = true
		var n int
		if _, err := fmt.Sscan(id, &n); err != nil || n < 10 || n > 19 || !bytes.Equal(b, msgs[n]) {
			t.Errorf("Archive has message %q (%d bytes), not one of 10–19 unchanged", id, len(b))
		}
	}
	if len(archive) != 10 || len(moved) != 10 {
		t.Errorf("Archive has %d messages (%d distinct), want 10; mutt's screen:\n%q", len(archive), len(moved), clip(screen, 3000))
	}
	if len(inbox) != len(msgs)-10 {
		t.Errorf("INBOX has %d messages after the move, want %d", len(inbox), len(msgs)-10)
	}
	for _, b := range inbox {
		if moved[interopID(b)] {
			t.Errorf("message %s is still in INBOX after the move", interopID(b))
		}
	}
}

// TestInteropPOP3Poplib runs test/py/pop3check.py, which drives every
// POP3 command with Python's poplib against a maildrop of real mail.
func TestInteropPOP3Poplib(t *testing.T) {
	t.Parallel()
	python := requireTool(t, "python3")
	srv := NewServer(t, "")
	user := srv.AddAccounts("pop")[0]
	l := withListeners(t, "pop3")
	srv.StartWith(l)
	msgs := interopMessages(t, 30)
	appendAll(t, srv, user, "INBOX", msgs)
	dir := t.TempDir()
	for i, m := range msgs {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.eml", i)), m, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(repoRoot(), "test", "py", "pop3check.py")
	out, err := runToolErr(2*time.Minute, dir, nil, python, script, "--pop3", l.POP3, "--user", user,
		"--password", testPassword, "--dir", dir)
	if err != nil {
		t.Fatalf("pop3check.py: %v\n%s", err, out)
	}
	t.Logf("pop3check.py:\n%s", out)
}
