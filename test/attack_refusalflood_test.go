package blackbox

import (
	"fmt"
	"strings"
	"testing"
)

// TestAttackRefusalFloodLog: a flood of refused recipients from one
// client must not cost a delivery log row each (at thousands of sessions
// a second and 30 days of retention that would fill a small server's
// disk). The first 30 of a minute are logged one by one; the rest become
// one summary entry with their count, written when the minute ends or
// the server stops, and the web admin shows it.
func TestAttackRefusalFloodLog(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	boss := srv.AddAccounts("floodboss")[0]
	srv.Admin("account", "admin", boss)
	l := withListeners(t, "http")
	srv.StartWith(l)
	const sessions, perSession = 40, 5
	for i := range sessions {
		s := dialSMTP(t, srv.SMTP)
		s.expect("EHLO flood.example", 250)
		s.expect("MAIL FROM:<spammer@spam.example>", 250)
		for j := range perSession {
			s.expect(fmt.Sprintf("RCPT TO:<guess%d-%d@%s>", i, j, testDomain), 550)
		}
		s.expect("QUIT", 221)
	}
	// Stopping writes the minute's summary; the web admin reads the log.
	srv.Stop()
	srv.StartWith(l)
	page := adminLogin(t, "http://"+l.HTTP, boss).page("/admin/log?q=127.0.0.1&result=rejected")
	rows := strings.Count(page, `<tr class="r-rejected">`)
	if rows != 31 || !strings.Contains(page, "×170") || !strings.Contains(page, "170 more refusals from 127.0.0.1/32") {
		t.Fatalf("%d rows for 200 refusals; want 30 one by one and one summary of 170:\n%s", rows, clip(page, 4000))
	}
}
