package imapd

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// searchLine returns the untagged SEARCH response of a command's output.
func searchLine(t *testing.T, lines []string) string {
	t.Helper()
	for _, l := range lines {
		if strings.HasPrefix(l, "* SEARCH") {
			return l
		}
	}
	t.Fatalf("no SEARCH response in %q", lines)
	return ""
}

// TestSearchSessionState checks what the session resolves before the
// store searches: sequence numbers after an expunge, UID sets, \Recent,
// and messages whose expunge the session has not reported yet.
func TestSearchSessionState(t *testing.T) {
	e := newTestEnv(t, Config{})
	for i := 1; i <= 5; i++ {
		e.deliver("", plainMsg(fmt.Sprintf("u%d@example.com", i), fmt.Sprintf("msg %d", i),
			fmt.Sprintf("body word%d common", i), "Mon, 4 Mar 2024 08:00:00 +0000"))
	}
	// Another session selects INBOX first: the five are recent there,
	// not here (RFC 3501 §2.3.2).
	o := e.raw()
	o.login()
	if res := o.cmd("s", "SELECT INBOX"); !slices.Contains(res, "* 5 RECENT") {
		t.Fatalf("first SELECT: %q", res)
	}
	o.cmd("l", "LOGOUT")
	r := e.raw()
	r.login()
	if res := r.cmd("s", "SELECT INBOX"); !slices.Contains(res, "* 0 RECENT") {
		t.Fatalf("second SELECT: %q", res)
	}
	r.cmd("d", `STORE 2 +FLAGS.SILENT (\Deleted)`)
	r.cmd("x", "EXPUNGE") // view: UIDs 1 3 4 5 as sequence numbers 1-4
	cases := []struct{ cmd, want string }{
		{"SEARCH 2:3", "* SEARCH 2 3"},
		{"UID SEARCH 2:3", "* SEARCH 3 4"},
		{"SEARCH NOT 1:2", "* SEARCH 3 4"},
		{"SEARCH 3:*", "* SEARCH 3 4"},
		{"SEARCH 9", "* SEARCH"},
		{"SEARCH UID 2:4", "* SEARCH 2 3"},
		{"UID SEARCH UID 4:*", "* SEARCH 4 5"},
		{"SEARCH BODY word4", "* SEARCH 3"},
		{"UID SEARCH TEXT common", "* SEARCH 1 3 4 5"},
		{"UID SEARCH TEXT word2", "* SEARCH"},
		{"SEARCH OR BODY word1 FROM u5", "* SEARCH 1 4"},
		{"SEARCH KEYWORD \\Deleted", "* SEARCH"},
	}
	for i, c := range cases {
		if got := searchLine(t, r.cmd(fmt.Sprintf("c%d", i), c.cmd)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.cmd, got, c.want)
		}
	}

	// A message that arrives while selected is \Recent here (RFC 3501).
	e.deliver("", plainMsg("late@example.com", "late", "body word6 common", "Mon, 4 Mar 2024 09:00:00 +0000"))
	r.cmd("n", "NOOP")
	for i, c := range []struct{ cmd, want string }{
		{"SEARCH RECENT", "* SEARCH 5"},
		{"SEARCH NEW", "* SEARCH 5"},
		{"SEARCH OLD", "* SEARCH 1 2 3 4"},
		{"UID SEARCH NOT RECENT BODY common", "* SEARCH 1 3 4 5"},
	} {
		if got := searchLine(t, r.cmd(fmt.Sprintf("r%d", i), c.cmd)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.cmd, got, c.want)
		}
	}

	// Another session expunges UID 3; until this session reports it, the
	// message keeps its number but no longer matches (RFC 9051 §7.5.1).
	o = e.raw()
	o.login()
	o.cmd("s", "SELECT INBOX")
	o.cmd("d", `UID STORE 3 +FLAGS.SILENT (\Deleted)`)
	o.cmd("x", "EXPUNGE")
	got := searchLine(t, r.cmd("p", "SEARCH BODY common"))
	if got != "* SEARCH 1 3 4 5" {
		t.Errorf("after a foreign expunge: got %q, want %q", got, "* SEARCH 1 3 4 5")
	}
	lines := r.cmd("q", "NOOP")
	if !slices.Contains(lines, "* 2 EXPUNGE") {
		t.Errorf("NOOP did not report the expunge: %q", lines)
	}
	if got := searchLine(t, r.cmd("t", "SEARCH BODY common")); got != "* SEARCH 1 2 3 4" {
		t.Errorf("after NOOP: got %q", got)
	}
}
