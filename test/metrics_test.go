package blackbox

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"pimail/internal/metrics"
)

// scrape fetches /metrics from the server's HTTP listener and parses it.
func scrape(t *testing.T, httpAddr string) []metrics.Sample {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v", resp.Status, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("/metrics Content-Type %q", ct)
	}
	samples, err := metrics.ParseText(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, clip(string(body), 2000))
	}
	return samples
}

// metricDelta is one expected change of a series between two scrapes.
type metricDelta struct {
	name   string
	labels map[string]string
	min    float64 // the series must grow by at least this much
	max    float64 // and at most this much (< 0: no upper bound)
}

// TestMetricsIMAPPOP3 drives IMAP and POP3 sessions (logins that work and
// fail, known, failing and unknown commands) and checks that /metrics
// counts each: connections, active connections back to where they were
// after the sessions close, logins, failed logins, commands by name and
// failed commands. Exact counts where the test controls every session.
func TestMetricsIMAPPOP3(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "[spam]\nenabled = false\n")
	user := srv.AddAccounts("counted")[0]
	l := withListeners(t, "pop3", "http")
	srv.StartWith(l)
	s := dialSMTP(t, srv.SMTP)
	s.send("sender@example.org", []string{user}, generatedMessage("metrics", 1, 2000))
	s.expect("QUIT", 221)

	before := scrape(t, l.HTTP)

	// IMAP: one session that fails to log in, one that logs in and works.
	bad := dialIMAP(t, srv.IMAP)
	bad.expectStatus("a1", fmt.Sprintf("LOGIN %q %q", user, "wrong-password"), "NO")
	bad.expectStatus("a2", "LOGOUT", "OK")
	ic := dialIMAP(t, srv.IMAP)
	ic.login(user)
	ic.expectStatus("s1", "SELECT INBOX", "OK")
	ic.expectStatus("f1", "FETCH 1 (FLAGS)", "OK")
	ic.expectStatus("f2", "UID FETCH 1:* (UID)", "OK")
	ic.expectStatus("x1", "XYZZY", "BAD")
	ic.expectStatus("s2", "SELECT NoSuchMailbox", "NO")
	ic.expectStatus("o1", "LOGOUT", "OK")

	// POP3: a failed and a good login, STAT, an unknown command.
	p := dialPOP3(t, l.POP3)
	p.expectOK("USER " + user)
	if resp, err := p.cmd("PASS wrong-password"); err != nil || !strings.HasPrefix(resp, "-ERR") {
		t.Fatalf("POP3 wrong password: %q %v", resp, err)
	}
	p.expectOK("USER " + user)
	p.expectOK("PASS " + testPassword)
	p.expectOK("STAT")
	if resp, err := p.cmd("XYZZY"); err != nil || !strings.HasPrefix(resp, "-ERR") {
		t.Fatalf("POP3 unknown command: %q %v", resp, err)
	}
	p.expectOK("QUIT")

	imap := map[string]string{"protocol": "imap"}
	pop := map[string]string{"protocol": "pop3"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	want := []metricDelta{
		{"pimail_connections_total", imap, 2, 2},
		{"pimail_connections_total", pop, 1, 1},
		{"pimail_logins_total", imap, 1, 1},
		{"pimail_logins_total", pop, 1, 1},
		{"pimail_auth_failures_total", imap, 1, 1},
		{"pimail_auth_failures_total", pop, 1, 1},
		{"pimail_commands_total", with(imap, "command", "LOGIN"), 2, 2},
		{"pimail_commands_total", with(imap, "command", "SELECT"), 2, 2},
		{"pimail_commands_total", with(imap, "command", "FETCH"), 1, 1},
		{"pimail_commands_total", with(imap, "command", "UID FETCH"), 1, 1},
		{"pimail_commands_total", with(imap, "command", "unknown"), 1, 1},
		{"pimail_command_failures_total", with(imap, "command", "LOGIN"), 1, 1},
		{"pimail_command_failures_total", with(imap, "command", "SELECT"), 1, 1},
		{"pimail_command_failures_total", with(imap, "command", "unknown"), 1, 1},
		{"pimail_commands_total", with(pop, "command", "USER"), 2, 2},
		{"pimail_commands_total", with(pop, "command", "PASS"), 2, 2},
		{"pimail_commands_total", with(pop, "command", "STAT"), 1, 1},
		{"pimail_commands_total", with(pop, "command", "unknown"), 1, 1},
		{"pimail_command_failures_total", with(pop, "command", "PASS"), 1, 1},
		{"pimail_command_failures_total", with(pop, "command", "unknown"), 1, 1},
		{"pimail_internal_errors_total", imap, 0, 0},
		{"pimail_internal_errors_total", pop, 0, 0},
	}
	// The sessions end on the server shortly after the client's LOGOUT
	// or QUIT; wait for the active gauges to come back.
	var after []metrics.Sample
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		after = scrape(t, l.HTTP)
		if metrics.Sum(after, "pimail_connections_active", imap) == metrics.Sum(before, "pimail_connections_active", imap) &&
			metrics.Sum(after, "pimail_connections_active", pop) == metrics.Sum(before, "pimail_connections_active", pop) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("active connections did not come back: imap %v → %v, pop3 %v → %v",
				metrics.Sum(before, "pimail_connections_active", imap), metrics.Sum(after, "pimail_connections_active", imap),
				metrics.Sum(before, "pimail_connections_active", pop), metrics.Sum(after, "pimail_connections_active", pop))
		}
	}
	for _, w := range want {
		d := metrics.Sum(after, w.name, w.labels) - metrics.Sum(before, w.name, w.labels)
		if d < w.min || w.max >= 0 && d > w.max {
			t.Errorf("%s%v grew by %v, want %v..%v", w.name, w.labels, d, w.min, w.max)
		}
	}
	t.Logf("imap: %v connections, %v commands; pop3: %v connections, %v commands",
		metrics.Sum(after, "pimail_connections_total", imap), metrics.Sum(after, "pimail_commands_total", imap),
		metrics.Sum(after, "pimail_connections_total", pop), metrics.Sum(after, "pimail_commands_total", pop))
}
