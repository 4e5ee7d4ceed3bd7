package blackbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// maxSizeConfig is the config file of the bad-input tests: a small
// message size limit so that oversized mail is cheap to send.
const (
	smallMaxSize  = 64 << 10
	maxSizeConfig = "[smtp]\nmax_message_size = 65536\n"
	tenMB         = 10 << 20
	// rssGrowthLimit is a coarse sanity bound in KiB. RSS moves by about
	// 10 MiB on its own while the garbage of an argon2id login (19 MiB) is
	// collected, so the deterministic check that a line is refused early
	// is that the server stops reading it (refusedEarly); this catches
	// gross buffering of many such lines.
	rssGrowthLimit = 16 << 10
)

// TestSMTPBadInput checks the SMTP server's answers to unknown recipients,
// oversized messages and malformed commands, and that the session goes on.
func TestSMTPBadInput(t *testing.T) {
	srv := NewServer(t, maxSizeConfig)
	users := srv.AddAccounts("victim")
	srv.Start()

	t.Run("unknown-recipient", func(t *testing.T) {
		s := dialSMTP(t, srv.SMTP)
		s.expect("MAIL FROM:<sender@example.org>", 250)
		s.expect("RCPT TO:<nobody@"+testDomain+">", 550)
		s.expect("RCPT TO:<nobody@unrelated.example>", 550) // no relaying
		s.expect("RCPT TO:<"+users[0]+">", 250)
		if code, text, err := s.data(generatedMessage("after-550", 1, 500)); err != nil || code != 250 {
			t.Fatalf("DATA after a 550 recipient: %d %q %v", code, text, err)
		}
		s.expect("QUIT", 221)
	})

	t.Run("malformed-commands", func(t *testing.T) {
		s := dialSMTP(t, srv.SMTP)
		for _, c := range []struct {
			line   string
			lo, hi int
		}{
			// RFC 5321 §4.2.4: an unrecognized command is 500 (502 is for
			// a recognized one that is not implemented); 501 is tolerated.
			{"FROBNICATE now", 500, 501},
			{"\x01\x02\xff binary", 500, 501},
			{"MAIL TO:<a@example.org>", 501, 501},
			{"MAIL FROM:<not an address", 501, 501},
			// §4.1.1.11: an unknown MAIL parameter is 555; 500/501 are
			// syntax errors and fine too.
			{"MAIL FROM:<sender@example.org> FOO=BAR", 500, 555},
			// Out of sequence: 503 (§4.2.4); some servers say 502.
			{"RCPT TO:<" + users[0] + ">", 502, 503},
			{"DATA", 502, 554},
			{"EHLO", 501, 501},
		} {
			code, text := s.expectClass(c.line, c.lo, c.hi)
			t.Logf("%q -> %d %s", c.line, code, strings.SplitN(text, "\n", 2)[0])
		}
		s.expect("NOOP", 250)
		s.expect("MAIL FROM:<sender@example.org>", 250)
		s.expect("RCPT TO:<"+users[0]+">", 250)
		s.expectClass("RCPT TO:<bad address>", 501, 553)
		if code, text, err := s.data(generatedMessage("after-garbage", 1, 500)); err != nil || code != 250 {
			t.Fatalf("DATA after malformed commands: %d %q %v", code, text, err)
		}
		s.expect("QUIT", 221)
	})

	t.Run("oversized", func(t *testing.T) {
		before := inboxCount(t, srv, users[0])
		blobsBefore := countBlobs(t, srv.Data)
		s := dialSMTP(t, srv.SMTP)
		ehlo := s.expect("EHLO client.example", 250)
		if !strings.Contains(ehlo, fmt.Sprintf("SIZE %d", smallMaxSize)) {
			t.Errorf("EHLO does not announce SIZE %d from the config:\n%s", smallMaxSize, ehlo)
		}
		s.expect(fmt.Sprintf("MAIL FROM:<sender@example.org> SIZE=%d", 4*smallMaxSize), 552)
		s.expect("MAIL FROM:<sender@example.org>", 250)
		s.expect("RCPT TO:<"+users[0]+">", 250)
		code, text, err := s.data(generatedMessage("oversized", 1, 4*smallMaxSize))
		if err != nil || code != 552 {
			t.Fatalf("end of an oversized DATA: want 552, got %d %q %v", code, text, err)
		}
		// The session may go on or end after 552; either way nothing is kept.
		if n := inboxCount(t, srv, users[0]); n != before {
			t.Errorf("INBOX went from %d to %d messages after a 552", before, n)
		}
		if n := countBlobs(t, srv.Data); n != blobsBefore {
			t.Errorf("stored message copies went from %d to %d after a 552", blobsBefore, n)
		}
		waitTmpEmpty(t, srv.Data)
		s2 := dialSMTP(t, srv.SMTP)
		s2.send("sender@example.org", users, generatedMessage("just-fits", 1, smallMaxSize-4096))
	})

	t.Run("long-lines", func(t *testing.T) {
		base := warmRSS(t, srv, users[0])
		// A 10 MB command line.
		s := dialSMTP(t, srv.SMTP)
		refusedEarly(t, "10 MB SMTP command line", flood(t, s.c, "NOOP ", tenMB, "\r\n"), tenMB)
		checkSMTPRefused(t, "10 MB SMTP command line", s, 500)
		// A 10 MB line inside DATA.
		s = dialSMTP(t, srv.SMTP)
		s.expect("MAIL FROM:<sender@example.org>", 250)
		s.expect("RCPT TO:<"+users[0]+">", 250)
		s.expect("DATA", 354)
		refusedEarly(t, "10 MB line in DATA", flood(t, s.c, "Subject: ", tenMB, "\r\n\r\nbody\r\n.\r\n"), tenMB)
		// Permanent: a retry of the same message would fail the same way.
		checkSMTPRefused(t, "10 MB line in DATA", s, 500)
		checkRSS(t, srv, base, "after 10 MB SMTP lines")
		// The server still works.
		s = dialSMTP(t, srv.SMTP)
		s.send("sender@example.org", users, generatedMessage("after-long-lines", 1, 500))
	})
}

// refusedEarly fails the test unless the server stopped reading well
// before the whole line was sent: a server that buffers the line reads it all.
func refusedEarly(t *testing.T, what string, sent, n int) {
	t.Helper()
	if sent > n/2 {
		t.Errorf("%s: the server read %d of %d bytes before refusing it", what, sent, n)
	}
}

// flood writes prefix, n filler bytes and suffix, stopping quietly when
// the server closes the connection (which is the point). It returns how
// many filler bytes were written.
func flood(t *testing.T, c interface {
	Write([]byte) (int, error)
	SetWriteDeadline(time.Time) error
}, prefix string, n int, suffix string) int {
	t.Helper()
	_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	if _, err := c.Write([]byte(prefix)); err != nil {
		return 0
	}
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := c.Write(chunk); err != nil {
			t.Logf("server stopped reading after %d of %d bytes: %v", sent, n, err)
			return sent
		}
	}
	_, _ = c.Write([]byte(suffix))
	return n
}

// checkSMTPRefused reads the server's answer to an over-long line: a
// reply code of at least minCode or a closed connection are fine.
func checkSMTPRefused(t *testing.T, what string, s *smtpConn, minCode int) {
	t.Helper()
	code, text, err := s.reply()
	switch {
	case isTimeout(err):
		t.Errorf("%s: no answer within %v: the server went on reading", what, ioTimeout)
	case err != nil:
		t.Logf("%s: connection closed (%v)", what, err)
	case code < minCode:
		t.Errorf("%s: want a %d+ reply, got %q", what, minCode, text)
	default:
		t.Logf("%s: refused with %s", what, text)
	}
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// inboxCount is the number of messages in user's INBOX.
func inboxCount(t *testing.T, srv *Server, user string) int {
	t.Helper()
	c := imapLogin(t, srv.IMAP, user, nil)
	defer c.Close()
	return len(fetchAll(t, c, "INBOX"))
}

// waitTmpEmpty waits up to 2 s for DATA/blobs/tmp to hold no files.
func waitTmpEmpty(t *testing.T, data string) {
	t.Helper()
	tmp := data + "/blobs/tmp"
	var names map[string][]byte
	for range 20 {
		names = readFilesIfExist(t, tmp)
		if len(names) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("%d temp files left in %s after a rejected message", len(names), tmp)
}
