package blackbox

import (
	"strings"
	"testing"
	"time"
)

// TestIMAPSequenceOutOfRange sends commands naming sequence numbers past
// the end of the selected mailbox (2 messages). RFC 9051 leaves the
// answer to the server (BAD for an invalid sequence number, or NO, or OK
// for "n:*", which is "2:n"), but the session must go on and the server
// must stay up: one user's typo must not end everyone's sessions.
func TestIMAPSequenceOutOfRange(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	user := srv.AddAccounts("seqrange")[0]
	srv.Start()
	appendAll(t, srv, user, "INBOX", [][]byte{generatedMessage("seqrange", 1, 200), generatedMessage("seqrange", 2, 200)})
	for _, cmd := range []string{
		"FETCH 5 (UID)",
		"FETCH 5:* (UID)",
		"FETCH *:5 (FLAGS)",
		"FETCH 4:3 (FLAGS)",
		`STORE 5:* +FLAGS (\Flagged)`,
		"COPY 5:* INBOX",
		"MOVE 5:* Trash",
		"FETCH 1:5 (FLAGS)",
		"FETCH 3 (BODY.PEEK[])",
		`STORE 5 +FLAGS (\Flagged)`,
		`STORE 1:5 +FLAGS.SILENT (\Seen)`,
		"COPY 5 INBOX",
		"MOVE 5 Trash",
		"SEARCH 5:*",
		"SEARCH 3",
		"UID FETCH 5 (UID)",
		"UID STORE 5:9 +FLAGS (\\Flagged)",
	} {
		ic := dialIMAP(t, srv.IMAP)
		ic.login(user)
		ic.expectStatus("S", "SELECT INBOX", "OK")
		st, lines, err := ic.command("C", cmd)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			if srv.Running() {
				t.Errorf("%s: no answer (%v)", cmd, err)
				continue
			}
			logs := srv.Logs()
			if i := strings.Index(logs, "panic:"); i >= 0 {
				logs = logs[i:]
			}
			t.Errorf("%s brought the whole server down:\n%s", cmd, clip(logs, 1500))
			srv.Stop()
			srv.Start() // go on with the other commands
			continue
		}
		t.Logf("%-36s → %s %q", cmd, st, lines)
		if !strings.HasPrefix(st, "OK") && !strings.HasPrefix(st, "NO") && !strings.HasPrefix(st, "BAD") {
			t.Errorf("%s: tagged %q", cmd, st)
		}
		ic.expectStatus("N", "NOOP", "OK")
	}
}
