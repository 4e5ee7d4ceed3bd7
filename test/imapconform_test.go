package blackbox

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestIMAPConformanceRegressions runs test/py/imapconform.py, which turns
// what Dovecot's imaptest found in pimail (issue 23; imaptest itself
// needs the network to build and cannot run in CI) into checks with
// Python's imaplib: "[" in mailbox names, literal8 APPEND of binary
// parts, ESEARCH MIN/MAX with MODSEQ, RECURSIVEMATCH, LSUB's \Noselect
// parents, \Recent in exactly one session and across a restart,
// subscriptions apart from mailboxes, FLAGS for new keywords, and the
// extensions added then: ESORT, CONTEXT=SEARCH/SORT, CATENATE, NOTIFY;
// and OBJECTID (RFC 8474): MAILBOXID, EMAILID, THREADID NIL.
func TestIMAPConformanceRegressions(t *testing.T) {
	python := requireTool(t, "python3")
	srv := NewServer(t, "")
	user := srv.AddAccounts("conform")[0]
	srv.Start()
	// Mail that arrives while nobody has INBOX selected, and a restart
	// before anyone does: it must be \Recent at the next SELECT.
	const recent = 2
	var msgs [][]byte
	for i := range recent {
		msgs = append(msgs, []byte(fmt.Sprintf("From: a@test.local\r\nSubject: early %d\r\n\r\nbody\r\n", i)))
	}
	appendAll(t, srv, user, "INBOX", msgs)
	srv.Stop()
	srv.Start()
	script := filepath.Join(repoRoot(), "test", "py", "imapconform.py")
	out, err := runToolErr(2*time.Minute, t.TempDir(), nil, python, script, "--imap", srv.IMAP, "--user", user,
		"--password", testPassword, "--recent", fmt.Sprint(recent))
	if err != nil {
		t.Fatalf("imapconform.py: %v\n%s", err, out)
	}
	t.Logf("imapconform.py:\n%s", out)
}
