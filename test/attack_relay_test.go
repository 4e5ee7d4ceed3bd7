package blackbox

import (
	"strings"
	"testing"
)

// TestAttackOpenRelay probes port 25, unauthenticated, with the classic
// relay tricks. Every one must be refused at RCPT (never 2xx), and
// nothing may be queued for delivery elsewhere (RFC 5321 §3.6.2, §3.9;
// RFC 2505 §2 lists the tricks).
func TestAttackOpenRelay(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	srv.AddAccounts("relayvictim")
	srv.Start()
	probes := []string{
		"victim@remote.example",                     // plain remote recipient
		"victim%remote.example@" + testDomain,       // %-hack
		"victim%remote.example",                     // %-hack without domain
		"@" + testDomain + ":victim@remote.example", // source route through us
		"@a.example,@b.example:victim@remote.example",
		`"victim@remote.example"@` + testDomain, // quoted local part with @
		"victim@remote.example@" + testDomain,   // user@remote@local
		"victim@" + testDomain + "@remote.example",
		"victim!remote.example@" + testDomain, // UUCP bang path
		"remote.example!victim",
		"victim@[127.0.0.1]", // address literal
		"victim@remote.example.",
		"victim@" + testDomain + ".remote.example",
		"victim@REMOTE.EXAMPLE",
	}
	s := dialSMTP(t, srv.SMTP)
	s.expect("MAIL FROM:<spammer@spam.example>", 250)
	accepted := 0
	for _, rcpt := range probes {
		code, text, err := s.cmd("RCPT TO:<" + rcpt + ">")
		if err != nil {
			t.Fatalf("RCPT TO:<%s>: %v", rcpt, err)
		}
		t.Logf("RCPT TO:<%s> -> %s", rcpt, strings.SplitN(text, "\n", 2)[0])
		if code/100 == 2 {
			accepted++
			t.Errorf("relay probe accepted: RCPT TO:<%s> -> %s", rcpt, text)
		}
	}
	if accepted == 0 {
		// With no recipient accepted, DATA must not start.
		code, _, err := s.cmd("DATA")
		if err != nil || code == 354 {
			t.Errorf("DATA after only refused recipients: %d %v", code, err)
		}
	}
	s.expect("RSET", 250)
	s.expect("QUIT", 221)
	if out := srv.Admin("queue", "list"); !strings.Contains(out, "queue is empty") {
		t.Errorf("something was queued for remote delivery:\n%s", out)
	}
}
