package blackbox

import (
	"path/filepath"
	"testing"
	"time"
)

// TestInteropIMAPImaplib runs test/py/imapext.py, which drives every IMAP
// extension issue 4 lists (CONDSTORE, QRESYNC, ESEARCH, SEARCHRES, SORT,
// THREAD, LIST-EXTENDED, LIST-STATUS, STATUS=SIZE, SPECIAL-USE,
// CREATE-SPECIAL-USE, MOVE, UIDPLUS, QUOTA, COMPRESS=DEFLATE,
// APPENDLIMIT, UNSELECT, ENABLE, IDLE, NAMESPACE, ID, LITERAL+, BINARY)
// with Python's imaplib against a new account and checks the answers.
func TestInteropIMAPImaplib(t *testing.T) {
	python := requireTool(t, "python3")
	srv := NewServer(t, "")
	user := srv.AddAccounts("pyimap")[0]
	srv.Admin("account", "quota", user, "10M") // a STORAGE limit for QUOTA (RFC 9208)
	srv.Start()
	script := filepath.Join(repoRoot(), "test", "py", "imapext.py")
	out, err := runToolErr(2*time.Minute, t.TempDir(), nil, python, script, "--imap", srv.IMAP, "--user", user,
		"--password", testPassword)
	if err != nil {
		t.Fatalf("imapext.py: %v\n%s", err, out)
	}
	t.Logf("imapext.py:\n%s", out)
}
