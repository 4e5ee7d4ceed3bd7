package blackbox

import (
	"strings"
	"testing"
)

// TestIMAPBadInput checks that garbage gets BAD and the session goes on,
// and that a 10 MB line and a 1 GB literal announcement are refused early,
// without the server's memory growing.
func TestIMAPBadInput(t *testing.T) {
	srv := NewServer(t, "")
	users := srv.AddAccounts("imapvictim")
	srv.Start()

	t.Run("garbage", func(t *testing.T) {
		ic := dialIMAP(t, srv.IMAP)
		// Before login.
		ic.expectStatus("g1", "FROBNICATE", "BAD")
		ic.expectStatus("g2", "LOGIN", "BAD")
		ic.expectStatus("g3", "SELECT INBOX extra (((", "BAD")
		ic.expectGarbage("\x01\x02\xff\xfe")
		ic.expectGarbage("*")
		ic.expectStatus("g4", "NOOP", "OK")
		ic.login(users[0])
		// After login.
		ic.expectStatus("g5", "SELECT", "BAD")
		ic.expectStatus("g6", "FETCH 1:* (FLAGS", "BAD")
		ic.expectStatus("g7", "SELECT INBOX", "OK")
		ic.expectStatus("g8", "FETCH x:y FLAGS", "BAD")
		ic.expectStatus("g9", "STORE 1 +FLAGS", "BAD")
		ic.expectStatus("g10", "UID FROB 1", "BAD")
		ic.expectStatus("g11", `SEARCH HEADER "unterminated`, "BAD")
		ic.expectStatus("g12", "NOOP", "OK")
		ic.expectStatus("g13", "LOGOUT", "OK")
	})

	t.Run("long-line", func(t *testing.T) {
		// Log in before measuring: password hashing has its own,
		// legitimate, memory peak.
		pre := dialIMAP(t, srv.IMAP)
		post := dialIMAP(t, srv.IMAP)
		post.login(users[0])
		base := warmRSS(t, srv, users[0])
		flood(t, pre.c, "l1 NOOP ", tenMB, "\r\n")
		checkIMAPRefused(t, "10 MB IMAP line before login", pre, "l1")
		flood(t, post.c, `l2 SEARCH HEADER Subject "`, tenMB, "\"\r\n")
		checkIMAPRefused(t, "10 MB IMAP line after login", post, "l2")
		checkRSS(t, srv, base, "after 10 MB IMAP lines")
	})

	t.Run("huge-literal", func(t *testing.T) {
		pre := dialIMAP(t, srv.IMAP)
		synced := dialIMAP(t, srv.IMAP)
		synced.login(users[0])
		nonsync := dialIMAP(t, srv.IMAP)
		nonsync.login(users[0])
		base := warmRSS(t, srv, users[0])
		// Before login a synchronizing literal of 1 GB must not be invited.
		if err := pre.write("h1 LOGIN {1073741824}\r\n"); err != nil {
			t.Fatal(err)
		}
		checkIMAPRefused(t, "1 GB literal in LOGIN", pre, "h1")

		if err := synced.write("h2 APPEND INBOX {1073741824}\r\n"); err != nil {
			t.Fatal(err)
		}
		checkIMAPRefused(t, "1 GB APPEND literal", synced, "h2")
		// The session goes on after a refused synchronizing literal.
		synced.expectStatus("h3", "NOOP", "OK")

		// A 1 GB non-synchronizing literal cannot be skipped cheaply: the
		// server must refuse it without buffering what follows.
		flood(t, nonsync.c, "h4 APPEND INBOX {1073741824+}\r\n", tenMB, "")
		checkIMAPRefused(t, "1 GB non-synchronizing APPEND literal", nonsync, "h4")
		checkRSS(t, srv, base, "after 1 GB literal announcements")

		c := imapLogin(t, srv.IMAP, users[0], nil)
		if n := len(fetchAll(t, c, "INBOX")); n != 0 {
			t.Errorf("refused APPENDs left %d messages in INBOX", n)
		}
	})
}

// expectGarbage sends a line that is not a command and expects a BAD
// (tagged or untagged) on the same, still usable, session.
func (ic *imapConn) expectGarbage(line string) {
	ic.t.Helper()
	if err := ic.write(line + "\r\n"); err != nil {
		ic.t.Fatalf("write garbage %q: %v", line, err)
	}
	resp, err := ic.line()
	if err != nil {
		ic.t.Fatalf("garbage %q: %v", line, err)
	}
	if _, rest, _ := strings.Cut(resp, " "); !strings.HasPrefix(rest, "BAD") {
		ic.t.Fatalf("garbage %q: want BAD, got %q", line, resp)
	}
}

// checkIMAPRefused reads the answer to an over-long line or an oversized
// literal: a tagged NO or BAD, an untagged BYE, or a closed connection are
// fine; a continuation request ("+") or OK are not.
func checkIMAPRefused(t *testing.T, what string, ic *imapConn, tag string) {
	t.Helper()
	for range 100 {
		line, err := ic.line()
		switch {
		case isTimeout(err):
			t.Errorf("%s: no answer within %v: the server went on reading", what, ioTimeout)
			return
		case err != nil:
			t.Logf("%s: connection closed (%v)", what, err)
			return
		case strings.HasPrefix(line, "+"):
			t.Errorf("%s: the server invited the literal: %q", what, clip(line, 200))
			return
		case strings.HasPrefix(line, "* BYE"):
			t.Logf("%s: %s", what, clip(line, 200))
			return
		case strings.HasPrefix(line, tag+" OK"):
			t.Errorf("%s: accepted: %q", what, clip(line, 200))
			return
		case strings.HasPrefix(line, tag+" NO"), strings.HasPrefix(line, tag+" BAD"):
			t.Logf("%s: %s", what, clip(line, 200))
			return
		case strings.HasPrefix(line, "* BAD"):
			// An untagged BAD (the tag could not be read); the session may go on.
			t.Logf("%s: %s", what, clip(line, 200))
			return
		}
	}
	t.Errorf("%s: no answer in 100 lines", what)
}
