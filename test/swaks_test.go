package blackbox

import (
	"strings"
	"testing"
	"time"
)

// TestSwaks is a smoke test with swaks: plain and pipelined deliveries
// arrive, and an unknown recipient makes swaks fail with 550.
func TestSwaks(t *testing.T) {
	t.Parallel()
	swaks := requireTool(t, "swaks")
	srv := NewServer(t, "")
	users := srv.AddAccounts("swaks")
	srv.Start()

	common := []string{"--server", srv.SMTP, "--from", "sender@example.org", "--helo", "client.example",
		"--timeout", "30"}
	for i, extra := range [][]string{
		{"--header", "Subject: swaks plain"},
		{"--header", "Subject: swaks pipelined", "--pipeline"},
	} {
		args := append(append([]string{"--to", users[0]}, common...), extra...)
		out := string(runTool(t, time.Minute, "", nil, swaks, args...))
		if !strings.Contains(out, "<-  250") || !strings.Contains(out, "<-  221") {
			t.Errorf("swaks run %d: no 250/221 in the transcript:\n%s", i+1, out)
		}
	}

	args := append([]string{"--to", "nobody@" + testDomain}, common...)
	out, err := runToolErr(time.Minute, "", nil, swaks, args...)
	if err == nil {
		t.Errorf("swaks to an unknown recipient succeeded:\n%s", out)
	} else if !strings.Contains(string(out), "<** 550") {
		t.Errorf("swaks to an unknown recipient: no 550 in the transcript (%v):\n%s", err, out)
	}

	c := imapLogin(t, srv.IMAP, users[0], nil)
	subjects := map[string]bool{}
	for _, m := range fetchAll(t, c, "INBOX") {
		subjects[headerValue(m, "Subject")] = true
	}
	for _, want := range []string{"swaks plain", "swaks pipelined"} {
		if !subjects[want] {
			t.Errorf("message %q not in INBOX (have %v)", want, subjects)
		}
	}
}
