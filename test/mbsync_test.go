package blackbox

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// mbsyncInbox pulls user's INBOX into a fresh Maildir with mbsync (isync)
// and returns the messages it wrote (LF line endings, as mbsync stores
// them), without the X-TUID field mbsync adds to the header of every
// message it copies. mbsync runs twice: the second run must find nothing
// new.
func mbsyncInbox(t *testing.T, srv *Server, user string) map[string][]byte {
	t.Helper()
	mbsync := requireTool(t, "mbsync")
	dir := t.TempDir()
	host, port, err := net.SplitHostPort(srv.IMAP)
	if err != nil {
		t.Fatal(err)
	}
	maildir := filepath.Join(dir, "INBOX")
	// isync 1.4 syntax (Debian 12): SSLType, Far/Near.
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
Create Near
Sync Pull
SyncState *
`, host, port, user, testPassword, dir, maildir)
	rcPath := filepath.Join(dir, "mbsyncrc")
	if err := os.WriteFile(rcPath, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + dir}
	out := runTool(t, 2*time.Minute, dir, env, mbsync, "-c", rcPath, "-a")
	t.Logf("mbsync: %s", out)
	got := readMaildir(t, maildir)
	for name, m := range got {
		got[name] = dropTUID(m)
	}
	out = runTool(t, 2*time.Minute, dir, env, mbsync, "-c", rcPath, "-a")
	if again := readMaildir(t, maildir); len(again) != len(got) {
		t.Errorf("second mbsync run changed the Maildir from %d to %d messages: %s", len(got), len(again), out)
	}
	return got
}

// dropTUID removes the "X-TUID: <12 chars>" line that mbsync inserts at
// the end of a message's header to track it during a sync.
func dropTUID(msg []byte) []byte {
	head, body, ok := bytes.Cut(msg, []byte("\n\n"))
	if !ok {
		return msg
	}
	lines := bytes.Split(head, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("X-TUID: ")) && len(l) == len("X-TUID: ")+12 {
			lines = append(lines[:i], lines[i+1:]...)
			return append(append(bytes.Join(lines, []byte("\n")), "\n\n"...), body...)
		}
	}
	return msg
}
