package imapd

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	highestRe = regexp.MustCompile(`\[HIGHESTMODSEQ (\d+)\]`)
	modseqRe  = regexp.MustCompile(`MODSEQ \((\d+)\)`)
)

// findNum returns the first number re captures in lines, or fails.
func findNum(t *testing.T, re *regexp.Regexp, lines []string) uint64 {
	t.Helper()
	for _, l := range lines {
		if m := re.FindStringSubmatch(l); m != nil {
			n, err := strconv.ParseUint(m[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %v in %q", re, lines)
	return 0
}

func TestCondStoreBasics(t *testing.T) {
	e := newTestEnv(t, Config{})
	for i := 0; i < 3; i++ {
		e.deliver("", multipartMsg)
	}
	r := e.raw()
	r.login()
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " CONDSTORE") || !strings.Contains(res[0], " QRESYNC") {
		t.Fatalf("capability: %q", res)
	}
	if res := r.cmd("e", "ENABLE CONDSTORE"); res[0] != "* ENABLED CONDSTORE" {
		t.Fatalf("enable: %q", res)
	}
	sel := r.cmd("s", "SELECT INBOX")
	high := findNum(t, highestRe, sel)
	res := r.cmd("f", "FETCH 1:* (UID MODSEQ)")
	if len(res) != 4 || !strings.HasPrefix(res[0], "* 1 FETCH (UID 1 MODSEQ (") {
		t.Fatalf("FETCH MODSEQ: %q", res)
	}
	if m := findNum(t, modseqRe, res[2:3]); m > high || m == 0 {
		t.Fatalf("modseq %d above HIGHESTMODSEQ %d", m, high)
	}

	// A plain STORE reports UID and the new MODSEQ once CONDSTORE is on.
	res = r.cmd("st", `STORE 2 +FLAGS (\Flagged)`)
	if !strings.HasPrefix(res[0], `* 2 FETCH (UID 2 FLAGS (\Flagged \Recent) MODSEQ (`) && !strings.HasPrefix(res[0], `* 2 FETCH (UID 2 FLAGS (\Flagged) MODSEQ (`) {
		t.Fatalf("STORE: %q", res)
	}
	m2 := findNum(t, modseqRe, res)
	if m2 <= high {
		t.Fatalf("STORE modseq %d not above %d", m2, high)
	}

	// CHANGEDSINCE answers only the changed message, with MODSEQ.
	res = r.cmd("cs", "FETCH 1:* (FLAGS) (CHANGEDSINCE "+strconv.FormatUint(high, 10)+")")
	if len(res) != 2 || !strings.HasPrefix(res[0], "* 2 FETCH (") || !strings.Contains(res[0], "MODSEQ ("+strconv.FormatUint(m2, 10)+")") {
		t.Fatalf("CHANGEDSINCE: %q", res)
	}

	// UNCHANGEDSINCE: message 2 changed after high, 1 and 3 did not.
	res = r.cmd("u", `STORE 1:3 (UNCHANGEDSINCE `+strconv.FormatUint(high, 10)+`) +FLAGS.SILENT (\Seen)`)
	if l := last(res); l != "u OK [MODIFIED 2] Conditional STORE failed" {
		t.Fatalf("UNCHANGEDSINCE: %q", res)
	}
	if len(res) != 3 || !strings.HasPrefix(res[0], "* 1 FETCH (UID 1 MODSEQ (") || !strings.HasPrefix(res[1], "* 3 FETCH (UID 3 MODSEQ (") {
		t.Fatalf("UNCHANGEDSINCE silent responses: %q", res)
	}
	res = r.cmd("f2", "FETCH 1:3 FLAGS")
	if strings.Contains(res[1], `\Seen`) || !strings.Contains(res[0], `\Seen`) || !strings.Contains(res[2], `\Seen`) {
		t.Fatalf("conditional store applied wrongly: %q", res)
	}
	res = r.cmd("u2", `UID STORE 2 (UNCHANGEDSINCE 0) +FLAGS (\Seen)`)
	if last(res) != "u2 OK [MODIFIED 2] Conditional STORE failed" {
		t.Fatalf("UNCHANGEDSINCE 0: %q", res)
	}

	// SEARCH MODSEQ with the highest modseq of the matches.
	res = r.cmd("se", "SEARCH MODSEQ "+strconv.FormatUint(high+1, 10))
	if !regexp.MustCompile(`^\* SEARCH 1 2 3 \(MODSEQ \d+\)$`).MatchString(res[0]) {
		t.Fatalf("SEARCH MODSEQ: %q", res)
	}
	res = r.cmd("se2", `UID SEARCH RETURN (COUNT) MODSEQ "/flags/\\flagged" all `+strconv.FormatUint(m2, 10))
	if !regexp.MustCompile(`^\* ESEARCH \(TAG "se2"\) UID COUNT \d MODSEQ \d+$`).MatchString(res[0]) {
		t.Fatalf("ESEARCH MODSEQ: %q", res)
	}
	if l := last(r.cmd("bad", "FETCH 1 FLAGS (CHANGEDSINCE 1 VANISHED)")); !strings.HasPrefix(l, "bad BAD") {
		t.Fatalf("VANISHED without UID FETCH/QRESYNC: %q", l)
	}
	if l := last(r.cmd("bad2", "SELECT INBOX (QRESYNC (1 1))")); !strings.HasPrefix(l, "bad2 BAD") {
		t.Fatalf("QRESYNC select without ENABLE: %q", l)
	}
}

// A command such as FETCH MODSEQ enables CONDSTORE: later unsolicited
// flag changes carry UID and MODSEQ.
func TestCondStoreImplicitEnable(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	a, b := e.raw(), e.raw()
	a.login()
	b.login()
	a.cmd("s", "SELECT INBOX")
	b.cmd("s", "SELECT INBOX")
	res := a.cmd("f", "FETCH 1 (MODSEQ)")
	if !strings.HasPrefix(res[0], "* OK [HIGHESTMODSEQ ") || !strings.HasPrefix(res[1], "* 1 FETCH (MODSEQ (") {
		t.Fatalf("implicit enable: %q", res)
	}
	b.cmd("st", `STORE 1 +FLAGS.SILENT (\Answered)`)
	res = a.cmd("n", "NOOP")
	if len(res) != 2 || !regexp.MustCompile(`^\* 1 FETCH \(UID 1 FLAGS \(\\Answered( \\Recent)?\) MODSEQ \(\d+\)\)$`).MatchString(res[0]) {
		t.Fatalf("unsolicited FETCH: %q", res)
	}
}

// The scenario QRESYNC exists for: a client disconnects, another session
// expunges and flags messages, and on reconnection the client learns
// exactly what changed.
func TestQResyncReconnect(t *testing.T) {
	e := newTestEnv(t, Config{})
	for i := 0; i < 6; i++ {
		e.deliver("", multipartMsg)
	}
	c := e.raw()
	c.login()
	c.cmd("e", "ENABLE QRESYNC")
	sel := c.cmd("s", "SELECT INBOX")
	high := findNum(t, highestRe, sel)
	uv := findNum(t, regexp.MustCompile(`\[UIDVALIDITY (\d+)\]`), sel)
	c.cmd("l", "LOGOUT")

	o := e.raw()
	o.login()
	o.cmd("s", "SELECT INBOX")
	o.cmd("d", `STORE 2,4 +FLAGS.SILENT (\Deleted)`)
	o.cmd("x", "EXPUNGE")
	o.cmd("f", `UID STORE 5 +FLAGS.SILENT (\Flagged)`)
	e.deliver("", multipartMsg) // UID 7, unknown to the client
	o.cmd("n", "NOOP")
	o.cmd("d2", `UID STORE 7 +FLAGS.SILENT (\Deleted)`)
	o.cmd("x2", "EXPUNGE")

	c = e.raw()
	c.login()
	if res := c.cmd("e", "ENABLE QRESYNC"); res[0] != "* ENABLED QRESYNC" {
		t.Fatalf("enable: %q", res)
	}
	res := c.cmd("s", "SELECT INBOX (QRESYNC ("+strconv.FormatUint(uv, 10)+" "+strconv.FormatUint(high, 10)+" 1:6))")
	var vanished, fetches []string
	for _, l := range res {
		switch {
		case strings.HasPrefix(l, "* VANISHED"):
			vanished = append(vanished, l)
		case strings.Contains(l, " FETCH "):
			fetches = append(fetches, l)
		}
	}
	if len(vanished) != 1 || vanished[0] != "* VANISHED (EARLIER) 2,4" {
		t.Fatalf("VANISHED: %q", res)
	}
	if len(fetches) != 1 || !regexp.MustCompile(`^\* 3 FETCH \(UID 5 FLAGS \(\\Flagged\) MODSEQ \(\d+\)\)$`).MatchString(fetches[0]) {
		t.Fatalf("FETCH: %q", res)
	}
	if !strings.Contains(strings.Join(res, "\n"), "* 4 EXISTS") || !strings.HasPrefix(last(res), "s OK [READ-WRITE]") {
		t.Fatalf("select: %q", res)
	}
	// Without known UIDs, the tombstone of UID 7 is reported as well.
	res = c.cmd("s2", "EXAMINE INBOX (QRESYNC ("+strconv.FormatUint(uv, 10)+" "+strconv.FormatUint(high, 10)+"))")
	if !slicesContain(res, "* VANISHED (EARLIER) 2,4,7") || !strings.HasPrefix(res[0], "* OK [CLOSED]") {
		t.Fatalf("examine: %q", res)
	}
	// A stale UIDVALIDITY voids the parameter.
	res = c.cmd("s3", "EXAMINE INBOX (QRESYNC (1 "+strconv.FormatUint(high, 10)+"))")
	if strings.Contains(strings.Join(res, "\n"), "VANISHED") || strings.Contains(strings.Join(res, "\n"), "FETCH") {
		t.Fatalf("stale uidvalidity: %q", res)
	}
	// UID FETCH with CHANGEDSINCE and VANISHED.
	res = c.cmd("uf", "UID FETCH 1:* (FLAGS) (CHANGEDSINCE "+strconv.FormatUint(high, 10)+" VANISHED)")
	if len(res) != 3 || res[0] != "* VANISHED (EARLIER) 2,4,7" || !strings.HasPrefix(res[1], "* 3 FETCH (UID 5 FLAGS (\\Flagged) MODSEQ (") {
		t.Fatalf("UID FETCH VANISHED: %q", res)
	}
}

// With QRESYNC enabled, expunges are reported as VANISHED, followed by
// the new HIGHESTMODSEQ.
func TestQResyncVanished(t *testing.T) {
	e := newTestEnv(t, Config{})
	for i := 0; i < 4; i++ {
		e.deliver("", multipartMsg)
	}
	a, b := e.raw(), e.raw()
	a.login()
	b.login()
	a.cmd("e", "ENABLE QRESYNC")
	a.cmd("s", "SELECT INBOX")
	b.cmd("s", "SELECT INBOX")
	a.cmd("d", `STORE 1,3 +FLAGS.SILENT (\Deleted)`)
	res := a.cmd("x", "EXPUNGE")
	if len(res) != 3 || res[0] != "* VANISHED 1,3" || !strings.HasPrefix(res[1], "* OK [HIGHESTMODSEQ ") {
		t.Fatalf("EXPUNGE under QRESYNC: %q", res)
	}
	b.cmd("d", `STORE 2 +FLAGS.SILENT (\Deleted)`)
	b.cmd("x", "EXPUNGE")
	// During a sequence-number FETCH the expunge waits, and the
	// HIGHESTMODSEQ given is below it.
	res = a.cmd("f", "FETCH 1:* (UID)")
	if strings.Contains(strings.Join(res, "\n"), "VANISHED") {
		t.Fatalf("VANISHED during FETCH: %q", res)
	}
	floor := findNum(t, highestRe, res)
	res = a.cmd("n", "NOOP")
	if len(res) != 3 || res[0] != "* VANISHED 2" {
		t.Fatalf("NOOP: %q", res)
	}
	if after := findNum(t, highestRe, res); after <= floor {
		t.Fatalf("HIGHESTMODSEQ %d after expunge not above floor %d", after, floor)
	}
}

func slicesContain(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}
