package blackbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// muttCopyInbox opens user's INBOX over IMAP in mutt, tags every message
// and pipes each one, raw, into its own file (pipe_split, no decoding, no
// separator), then quits. Copying into a local mailbox instead would make
// mutt add Lines: and Content-Length: fields. mutt needs a terminal, so it
// runs under script(1), which gives it a pseudo-terminal; its keystrokes
// come from a `push` in the muttrc, and its standard input is a pipe that
// never delivers anything, so no stray key reaches it. The messages come
// back with LF line endings, as mutt hands them to a pipe.
func muttCopyInbox(t *testing.T, srv *Server, user string) map[string][]byte {
	t.Helper()
	mutt := requireTool(t, "mutt")
	dir := t.TempDir()
	out := filepath.Join(dir, "piped")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	rc := muttPipeRC(user, srv.IMAP, `set header_cache = ""`, "~A", out)
	rcPath := filepath.Join(dir, "muttrc")
	if err := os.WriteFile(rcPath, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	screen := runInTerminal(t, dir, fmt.Sprintf("%s -n -F %s -f imap://%s/INBOX", mutt, rcPath, srv.IMAP))
	got := readFiles(t, out)
	if len(got) == 0 {
		t.Errorf("mutt piped no message; its screen:\n%q", clip(screen, 4000))
	}
	return got
}

// muttPipeRC is the configuration of the mutt and NeoMutt tests: user on
// addr's INBOX without TLS, read only (peek; nothing moved, deleted or
// recorded), and a push that pipes the messages matching pattern, raw,
// one file each, into the directory out and quits; extra lines (a
// client's own settings) go before the push.
func muttPipeRC(user, addr, extra, pattern, out string) string {
	return fmt.Sprintf(`set imap_user = "%s"
set imap_pass = "%s"
set folder = "imap://%s/"
set spoolfile = "+INBOX"
set ssl_starttls = no
set ssl_force_tls = no
set imap_passive = yes
set imap_peek = yes
set message_cachedir = ""
set move = no
set delete = no
set quit = yes
set record = ""
set wait_key = no
set sleep_time = 0
set mail_check_stats = no
set sort = mailbox-order
set pipe_split = yes
set pipe_decode = no
set pipe_sep = ""
%s
push "<tag-pattern>%s<enter><tag-prefix><pipe-message><kill-line>cat > \$(mktemp %s/msg.XXXXXX)<enter><quit>"
`, user, testPassword, addr, extra, pattern, out)
}

// runInTerminal runs a curses mail client's command line under script(1),
// which gives it a pseudo-terminal, in dir with HOME there; its standard
// input is a pipe held open and never written, so no stray key reaches
// it (its keys come from a push in its configuration). It returns the
// screen output and fails the test on a non-zero exit or after 90 s.
func runInTerminal(t *testing.T, dir, cmdline string) string {
	t.Helper()
	script := requireTool(t, "script")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-q", "-e", "-c", cmdline, "/dev/null")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "TERM=xterm", "COLUMNS=132", "LINES=40")
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinW.Close() // held open until the client is done: stdin never ends
	cmd.Stdin = stdinR
	cmd.WaitDelay = 5 * time.Second
	screen, err := cmd.CombinedOutput()
	stdinR.Close()
	if err != nil {
		t.Fatalf("%s under script: %v (timeout: %v)\nscreen: %q", cmdline, err, ctx.Err() != nil, clip(string(screen), 4000))
	}
	return string(screen)
}
