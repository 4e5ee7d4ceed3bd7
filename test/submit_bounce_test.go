package blackbox

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSubmitLocalFailureNotice submits one message to a remote recipient
// and to a local one whose quota this very message exceeds (no SIZE=, so
// RCPT cannot tell). The remote copy is queued before the local delivery
// fails; the client gets 250, so it does not send again, the remote
// recipient gets the message once, and the sender finds a failure notice
// (RFC 3464 DSN) for the local recipient in INBOX.
func TestSubmitLocalFailureNotice(t *testing.T) {
	t.Parallel()
	mx := startRemoteMX(t, 0)
	srv := NewServer(t, fmt.Sprintf(`[submission]
allow_loopback_auth = true
[queue]
mta_sts = false
[queue.transports."remote.example"]
host = %q
`, mx.addr))
	users := srv.AddAccounts("bouncesender", "bouncefull")
	sender, full := users[0], users[1]
	srv.Admin("account", "quota", full, "1K")
	l := withListeners(t, "submission")
	srv.StartWith(l)

	s := submitAuth(t, l.Submission, sender)
	s.expect("MAIL FROM:<"+sender+">", 250)
	s.expect("RCPT TO:<r@remote.example>", 250)
	s.expect("RCPT TO:<"+full+">", 250)
	msg := bytes.Replace(generatedMessage("bounce", 1, 4000), []byte("sender@example.org"), []byte(sender), 1)
	if code, text, err := s.data(msg); err != nil || code != 250 {
		t.Fatalf("DATA: %d %q %v (want 250: the remote copy is queued)", code, text, err)
	}
	s.expect("QUIT", 221)

	dsn := waitInbox(t, srv, sender, 1)[0]
	for _, want := range []string{"Undelivered Mail Returned to Sender", "multipart/report", "Final-Recipient: rfc822; " + full,
		"Action: failed", "Status: 5.2.2"} {
		if !strings.Contains(dsn, want) {
			t.Errorf("the notice lacks %q:\n%s", want, clip(dsn, 3000))
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ := mx.counts()
		if got["r@remote.example"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the remote got %d copies in 30 s, want 1", got["r@remote.example"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
