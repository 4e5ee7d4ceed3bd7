package blackbox

import (
	"fmt"
	"os"
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
	t.Parallel()
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

// TestInteropTLSClients runs test/py/tlscheck.py: Python's imaplib and
// poplib log in over IMAPS and POP3S (implicit TLS, RFC 8314) and over
// STARTTLS/STLS on the plain ports, each verifying the server's
// certificate and host name against the self-signed certificate in the
// data directory, and read the INBOX back byte for byte.
func TestInteropTLSClients(t *testing.T) {
	t.Parallel()
	python := requireTool(t, "python3")
	srv := NewServer(t, "")
	user := srv.AddAccounts("tlsclient")[0]
	l := withListeners(t, "imaps", "pop3", "pop3s")
	srv.StartWith(l)
	msgs := interopMessages(t, 15)
	appendAll(t, srv, user, "INBOX", msgs)
	dir := t.TempDir()
	for i, m := range msgs {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.eml", i)), m, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(repoRoot(), "test", "py", "tlscheck.py")
	out, err := runToolErr(2*time.Minute, dir, nil, python, script, "--imap", srv.IMAP, "--imaps", l.IMAPS,
		"--pop3", l.POP3, "--pop3s", l.POP3S, "--user", user, "--password", testPassword,
		"--cafile", filepath.Join(srv.Data, "tls", "self-signed.crt"), "--dir", dir)
	if err != nil {
		t.Fatalf("tlscheck.py: %v\n%s", err, out)
	}
	t.Logf("tlscheck.py:\n%s", out)
}
