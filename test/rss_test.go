package blackbox

import (
	"os"
	"testing"
	"time"
)

// warmRSS runs one ordinary SMTP session and one IMAP session with a
// login, so that buffers, goroutine stacks and the password hashing's
// memory (argon2id allocates tens of MiB per check) of normal use are in
// place, and returns the server's resident set size in KiB.
func warmRSS(t *testing.T, srv *Server, user string) int64 {
	t.Helper()
	s := dialSMTP(t, srv.SMTP)
	s.expect("NOOP", 250)
	s.expect("QUIT", 221)
	ic := dialIMAP(t, srv.IMAP)
	ic.expectStatus("w1", "CAPABILITY", "OK")
	ic.login(user)
	ic.expectStatus("w2", "LOGOUT", "OK")
	time.Sleep(200 * time.Millisecond)
	return srv.RSSKiB()
}

// checkRSS fails the test when the server's RSS grew by more than
// rssGrowthLimit since base.
func checkRSS(t *testing.T, srv *Server, base int64, when string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	now := srv.RSSKiB()
	t.Logf("RSS %s: %d KiB (was %d KiB, +%d KiB)", when, now, base, now-base)
	if now-base > rssGrowthLimit {
		t.Errorf("RSS grew by %d KiB %s (limit %d KiB): input is buffered instead of refused early",
			now-base, when, rssGrowthLimit)
	}
}

// readFilesIfExist is readFiles that returns nothing for a missing dir.
func readFilesIfExist(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	return readFiles(t, dir)
}
