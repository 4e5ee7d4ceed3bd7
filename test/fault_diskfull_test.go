//go:build linux

package blackbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountSmallFS moves the server's (not yet started) data directory onto a
// tmpfs of sizeMiB and unmounts it at the end of the test, after stopping
// the server. It skips the test when mounting is not permitted.
func mountSmallFS(t *testing.T, srv *Server, sizeMiB int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	hold := filepath.Join(t.TempDir(), "hold")
	if out, err := exec.Command("cp", "-a", srv.Data, hold).CombinedOutput(); err != nil {
		t.Fatalf("copy data directory: %v\n%s", err, out)
	}
	opt := fmt.Sprintf("size=%dm,mode=0700", sizeMiB)
	if err := syscall.Mount("tmpfs", srv.Data, "tmpfs", 0, opt); err != nil {
		t.Skipf("mount -t tmpfs -o %s: %v (not permitted here)", opt, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (tail):\n%s", clip(srv.Logs(), 8000))
		}
		srv.Stop()
		if err := syscall.Unmount(srv.Data, 0); err != nil {
			t.Errorf("unmount %s: %v", srv.Data, err)
		}
	})
	if out, err := exec.Command("cp", "-a", hold+"/.", srv.Data).CombinedOutput(); err != nil {
		t.Fatalf("copy data directory onto tmpfs: %v\n%s", err, out)
	}
}

// fillDisk writes a filler file until the filesystem is full and returns
// its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for range 100000 { // bounded: 6 GiB
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	// Fill the last partial block too.
	for range 4096 {
		if _, err := f.Write(chunk[:512]); err != nil {
			break
		}
	}
	return p
}

// TestFaultDiskFull runs the server on an 8 MiB tmpfs and fills it. SMTP
// must answer 452 4.3.1 (RFC 3463: mail system full) rather than a generic
// 451, IMAP APPEND a clear NO without [SERVERBUG], nothing stored before
// may be damaged, and when space comes back service resumes without a
// restart.
func TestFaultDiskFull(t *testing.T) {
	srv := NewServer(t, "[spam]\nenabled = false\n")
	user := srv.AddAccounts("full")[0]
	mountSmallFS(t, srv, 8)
	srv.Start()

	// Mail stored while there is room.
	var before [][]byte
	s := dialSMTP(t, srv.SMTP)
	for i := range 10 {
		m := generatedMessage("before-full", i, 20000)
		s.send("sender@example.org", []string{user}, m)
		before = append(before, m)
	}
	ic := dialIMAP(t, srv.IMAP)
	ic.login(user)
	st, err := ic.appendMsg("A0", "Drafts", generatedMessage("draft-before", 0, 5000))
	if err != nil || !strings.HasPrefix(st, "OK") {
		t.Fatalf("APPEND with room: %q %v", st, err)
	}

	filler := fillDisk(t, srv.Data)
	var fs syscall.Statfs_t
	_ = syscall.Statfs(srv.Data, &fs)
	t.Logf("filesystem full: %d bytes free", fs.Bavail*uint64(fs.Bsize))

	// SMTP: a temporary refusal that names the cause.
	s = dialSMTP(t, srv.SMTP)
	for i := range 3 {
		s.expect("MAIL FROM:<sender@example.org>", 250)
		s.expect("RCPT TO:<"+user+">", 250)
		code, text, err := s.data(generatedMessage("while-full", i, 200000))
		t.Logf("DATA on a full disk: %d %q %v", code, text, err)
		if err != nil || code != 452 || !strings.Contains(text, "4.3.1") {
			t.Errorf("end of DATA on a full disk: want 452 4.3.1, got %d %q %v", code, text, err)
		}
		s.expect("RSET", 250)
	}
	// IMAP: NO with a clear text, not an internal error.
	for i := range 3 {
		st, err := ic.appendMsg(fmt.Sprintf("F%d", i), "INBOX", generatedMessage("append-full", i, 200000))
		t.Logf("APPEND on a full disk: %q %v", st, err)
		if err != nil || !strings.HasPrefix(st, "NO") || strings.Contains(st, "SERVERBUG") {
			t.Errorf("APPEND on a full disk: want NO (not SERVERBUG), got %q %v", st, err)
		}
	}
	ic.expectStatus("N1", "NOOP", "OK")

	// What was stored before is intact and readable.
	checkStored := func(when string) {
		c := imapLogin(t, srv.IMAP, user, nil)
		defer c.Close()
		got := fetchAll(t, c, "INBOX")
		n := 0
		for _, msg := range got {
			for _, w := range before {
				if bytes.HasSuffix(msg, w) {
					n++
				}
			}
			if strings.HasPrefix(headerValue(msg, "Subject"), "while-full") || strings.HasPrefix(headerValue(msg, "Subject"), "append-full") {
				t.Errorf("%s: a refused message is in INBOX: %q", when, headerValue(msg, "Subject"))
			}
		}
		if n != len(before) {
			t.Errorf("%s: %d of %d messages stored before the disk filled are intact", when, n, len(before))
		}
	}
	checkStored("disk full")

	// Space comes back: service resumes without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s = dialSMTP(t, srv.SMTP)
	s.send("sender@example.org", []string{user}, generatedMessage("after-full", 1, 20000))
	before = append(before, generatedMessage("after-full", 1, 20000))
	st, err = ic.appendMsg("A1", "INBOX", generatedMessage("append-after", 1, 20000))
	if err != nil || !strings.HasPrefix(st, "OK") {
		t.Errorf("APPEND after space came back: %q %v", st, err)
	}
	checkStored("after space came back")
	if !srv.Running() {
		t.Fatal("the server died")
	}
}
