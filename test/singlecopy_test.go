package blackbox

import (
	"fmt"
	"testing"
)

// TestSingleCopy sends one message to 15 local recipients and checks that
// it is stored once: one new copy (a file or a row of blob_data) of about
// the message's size, while all 15 mailboxes show it.
func TestSingleCopy(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "[spam]\nenabled = false\n") // not about spam: every message to INBOX
	locals := make([]string, 15)
	for i := range locals {
		locals[i] = fmt.Sprintf("r%02d", i+1)
	}
	users := srv.AddAccounts(locals...)
	srv.Start()

	beforeN, beforeSize := blobStats(t, srv.Data)
	msg := generatedMessage("single-copy", 1, 48<<10)
	s := dialSMTP(t, srv.SMTP)
	s.send("sender@example.org", users, msg)
	s.expect("QUIT", 221)

	afterN, afterSize := blobStats(t, srv.Data)
	n, size := afterN-beforeN, afterSize-beforeSize
	t.Logf("message %d bytes; %d new stored copies, %d bytes", len(msg), n, size)
	if n != 1 {
		t.Errorf("one message to 15 recipients left %d new stored copies, want 1", n)
	}
	// One copy: the message plus at most a few KB of trace fields, and not
	// less than half of it (allowing for compression of text).
	if size < int64(len(msg))/2 || size > int64(len(msg))+4096 {
		t.Errorf("blob bytes %d for a %d-byte message: not one copy", size, len(msg))
	}
	for _, u := range users {
		c := imapLogin(t, srv.IMAP, u, nil)
		got := fetchAll(t, c, "INBOX")
		reportQuiet(t, u, got, map[string][]byte{"single": msg})
		c.Logout().Wait()
	}
}

// reportQuiet is reportMismatch without the success log line.
func reportQuiet(t *testing.T, user string, got, want map[string][]byte) {
	t.Helper()
	for _, err := range matchAll(got, want, "\r\n") {
		t.Errorf("%s: %v", user, err)
	}
}
