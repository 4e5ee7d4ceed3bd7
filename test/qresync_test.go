package blackbox

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// flagsFetch is one "* SEQ FETCH (UID u FLAGS (...) MODSEQ (m))" line.
type flagsFetch struct {
	Seq    int
	UID    uint32
	Flags  string // sorted, space separated
	ModSeq uint64
}

var (
	fetchLineRe  = regexp.MustCompile(`^\* (\d+) FETCH \((.*)\)$`)
	fetchUIDRe   = regexp.MustCompile(`(?:^| )UID (\d+)`)
	fetchFlagsRe = regexp.MustCompile(`(?:^| )FLAGS \(([^)]*)\)`)
	fetchModRe   = regexp.MustCompile(`(?:^| )MODSEQ \((\d+)\)`)
	modseqCodeRe = regexp.MustCompile(`\[HIGHESTMODSEQ (\d+)\]`)
	uidValRe     = regexp.MustCompile(`\[UIDVALIDITY (\d+)\]`)
)

// parseFlagsFetch parses a FETCH response line with UID, FLAGS and
// MODSEQ; ok is false for any other line.
func parseFlagsFetch(line string) (f flagsFetch, ok bool) {
	m := fetchLineRe.FindStringSubmatch(line)
	if m == nil {
		return f, false
	}
	f.Seq, _ = strconv.Atoi(m[1])
	if u := fetchUIDRe.FindStringSubmatch(m[2]); u != nil {
		n, _ := strconv.ParseUint(u[1], 10, 32)
		f.UID = uint32(n)
	}
	if fl := fetchFlagsRe.FindStringSubmatch(m[2]); fl != nil {
		// \Recent is per session (RFC 3501 §2.3.2): not compared.
		fs := slices.DeleteFunc(strings.Fields(fl[1]), func(f string) bool { return strings.EqualFold(f, `\Recent`) })
		slices.Sort(fs)
		f.Flags = strings.Join(fs, " ")
	}
	if ms := fetchModRe.FindStringSubmatch(m[2]); ms != nil {
		f.ModSeq, _ = strconv.ParseUint(ms[1], 10, 64)
	}
	return f, true
}

// codeNumber returns the number of a response code (re) in lines.
func codeNumber(t *testing.T, re *regexp.Regexp, lines []string) uint64 {
	t.Helper()
	for _, l := range lines {
		if m := re.FindStringSubmatch(l); m != nil {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in %q", re, lines)
	return 0
}

// currentState returns every message of INBOX as the FETCH line a
// QRESYNC client should get for it (UID, FLAGS, MODSEQ, sequence number),
// read by session ic with a plain UID FETCH 1:*.
func currentState(t *testing.T, ic *imapConn) map[uint32]flagsFetch {
	t.Helper()
	st, lines, err := ic.command("S1", "UID FETCH 1:* (FLAGS MODSEQ)")
	if err != nil || !strings.HasPrefix(st, "OK") {
		t.Fatalf("UID FETCH 1:* (FLAGS MODSEQ): %q %v", st, err)
	}
	out := map[uint32]flagsFetch{}
	for _, l := range lines {
		if f, ok := parseFlagsFetch(l); ok {
			out[f.UID] = f
		}
	}
	return out
}

// TestQRESYNCReconnect: a client that knows a mailbox at some
// HIGHESTMODSEQ reconnects with SELECT (QRESYNC ...) after another
// session flagged, expunged and appended messages, and must get exactly
// the VANISHED (EARLIER) UIDs and FETCH (UID FLAGS MODSEQ) lines for what
// changed, with correct sequence numbers, no EXPUNGE and nothing for an
// unchanged message (RFC 7162 §3.2.5). Also checked: the known-uids
// argument narrowing both, a reconnect at the current HIGHESTMODSEQ
// getting nothing, UID FETCH (CHANGEDSINCE m VANISHED) (§3.2.6), and a
// live QRESYNC session getting VANISHED instead of EXPUNGE (§3.2.10).
func TestQRESYNCReconnect(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	user := srv.AddAccounts("qresync")[0]
	srv.Start()
	var msgs [][]byte
	for i := range 20 {
		msgs = append(msgs, generatedMessage("qresync", i, 400))
	}
	appendAll(t, srv, user, "INBOX", msgs) // UIDs 1..20

	// The client's first session: remember UIDVALIDITY and HIGHESTMODSEQ.
	a := dialIMAP(t, srv.IMAP)
	a.login(user)
	a.expectStatus("A1", "ENABLE QRESYNC", "OK")
	st, lines, err := a.command("A2", "SELECT INBOX")
	if err != nil || !strings.HasPrefix(st, "OK") {
		t.Fatalf("SELECT: %q %v", st, err)
	}
	uidValidity := codeNumber(t, uidValRe, lines)
	m0 := codeNumber(t, modseqCodeRe, lines)
	a.expectStatus("A3", "LOGOUT", "OK")

	// Another session changes the mailbox.
	b := dialIMAP(t, srv.IMAP)
	b.login(user)
	b.expectStatus("B1", "ENABLE CONDSTORE", "OK")
	b.expectStatus("B2", "SELECT INBOX", "OK")
	b.expectStatus("B3", `UID STORE 3,7 +FLAGS.SILENT (\Flagged)`, "OK")
	b.expectStatus("B4", `UID STORE 10 +FLAGS.SILENT (\Seen $Important)`, "OK")
	b.expectStatus("B5", `UID STORE 12 +FLAGS.SILENT (\Deleted)`, "OK")  // flagged, not expunged
	b.expectStatus("B6", `UID STORE 18 +FLAGS.SILENT (\Answered)`, "OK") // changed, then expunged
	b.expectStatus("B7", `UID STORE 5,6,15,18 +FLAGS.SILENT (\Deleted)`, "OK")
	b.expectStatus("B8", "UID EXPUNGE 5,6,15,18", "OK")
	appendAll(t, srv, user, "INBOX", [][]byte{generatedMessage("qresync", 20, 400)}) // UID 21
	b.expectStatus("B9", "NOOP", "OK")
	state := currentState(t, b)
	if len(state) != 17 {
		t.Fatalf("the mailbox has %d messages after the changes, want 17", len(state))
	}

	type reconnect struct {
		name         string
		selectArgs   string
		wantVanished string
		wantFetch    []uint32
	}
	for _, rc := range []reconnect{
		{"all known", fmt.Sprintf("(QRESYNC (%d %d))", uidValidity, m0), "5:6,15,18", []uint32{3, 7, 10, 12, 21}},
		{"known uids 1:20", fmt.Sprintf("(QRESYNC (%d %d 1:20))", uidValidity, m0), "5:6,15,18", []uint32{3, 7, 10, 12}},
		{"known uids 1:10", fmt.Sprintf("(QRESYNC (%d %d 1:10))", uidValidity, m0), "5:6", []uint32{3, 7, 10}},
	} {
		t.Run(rc.name, func(t *testing.T) {
			c := dialIMAP(t, srv.IMAP)
			c.login(user)
			c.expectStatus("C1", "ENABLE QRESYNC", "OK")
			st, lines, err := c.command("C2", "SELECT INBOX "+rc.selectArgs)
			if err != nil || !strings.HasPrefix(st, "OK") {
				t.Fatalf("SELECT INBOX %s: %q %v", rc.selectArgs, st, err)
			}
			checkQresyncLines(t, lines, state, rc.wantVanished, rc.wantFetch)
			if n := codeNumber(t, modseqCodeRe, lines); n < maxModSeq(state) {
				t.Errorf("HIGHESTMODSEQ %d is below a message's MODSEQ %d", n, maxModSeq(state))
			}
		})
	}

	t.Run("up to date", func(t *testing.T) {
		c := dialIMAP(t, srv.IMAP)
		c.login(user)
		c.expectStatus("C1", "ENABLE QRESYNC", "OK")
		_, lines, _ := c.command("C0", "EXAMINE INBOX")
		now := codeNumber(t, modseqCodeRe, lines)
		c.expectStatus("C3", "CLOSE", "OK")
		st, lines, err := c.command("C2", fmt.Sprintf("SELECT INBOX (QRESYNC (%d %d))", uidValidity, now))
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("SELECT (QRESYNC at HIGHESTMODSEQ): %q %v", st, err)
		}
		checkQresyncLines(t, lines, state, "", nil)
	})

	t.Run("wrong uidvalidity", func(t *testing.T) {
		c := dialIMAP(t, srv.IMAP)
		c.login(user)
		c.expectStatus("C1", "ENABLE QRESYNC", "OK")
		st, lines, err := c.command("C2", fmt.Sprintf("SELECT INBOX (QRESYNC (%d %d))", uidValidity+1, m0))
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("SELECT (QRESYNC, other UIDVALIDITY): %q %v", st, err)
		}
		// RFC 7162 §3.2.5.2: nothing about the changes: the client must
		// start over.
		checkQresyncLines(t, lines, state, "", nil)
	})

	t.Run("changedsince vanished", func(t *testing.T) {
		c := dialIMAP(t, srv.IMAP)
		c.login(user)
		c.expectStatus("C1", "ENABLE QRESYNC", "OK")
		c.expectStatus("C2", "SELECT INBOX", "OK")
		st, lines, err := c.command("C3", fmt.Sprintf("UID FETCH 1:* (FLAGS) (CHANGEDSINCE %d VANISHED)", m0))
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("UID FETCH (CHANGEDSINCE VANISHED): %q %v", st, err)
		}
		checkQresyncLines(t, lines, state, "5:6,15,18", []uint32{3, 7, 10, 12, 21})
	})

	t.Run("live session", func(t *testing.T) {
		c := dialIMAP(t, srv.IMAP)
		c.login(user)
		c.expectStatus("C1", "ENABLE QRESYNC", "OK")
		c.expectStatus("C2", "SELECT INBOX", "OK")
		b.expectStatus("B10", `UID STORE 4 +FLAGS.SILENT (\Deleted)`, "OK")
		b.expectStatus("B11", "UID EXPUNGE 4", "OK")
		b.expectStatus("B12", `UID STORE 8 +FLAGS.SILENT (\Flagged)`, "OK")
		now := currentState(t, b)
		st, lines, err := c.command("C3", "NOOP")
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("NOOP: %q %v", st, err)
		}
		// The FETCH for UID 8 may come before or after the VANISHED;
		// its sequence number must fit the moment it is sent.
		var vanished []string
		var fetches []flagsFetch
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "* VANISHED "):
				vanished = append(vanished, l)
			case strings.HasSuffix(l, " EXPUNGE"):
				t.Errorf("an EXPUNGE response in a QRESYNC session: %q", l)
			default:
				if f, ok := parseFlagsFetch(l); ok {
					if len(vanished) == 0 {
						f.Seq-- // sent before UID 4 (seq 2) vanished
					}
					fetches = append(fetches, f)
				}
			}
		}
		if len(vanished) != 1 || vanished[0] != "* VANISHED 4" {
			t.Errorf("NOOP after another session expunged UID 4: %q, want [\"* VANISHED 4\"]", vanished)
		}
		if len(fetches) != 1 || fetches[0] != now[8] {
			t.Errorf("NOOP after another session flagged UID 8: FETCH %+v, want %+v (all: %q)", fetches, now[8], lines)
		}
	})
}

// checkQresyncLines compares the untagged responses of a QRESYNC SELECT
// or a CHANGEDSINCE/VANISHED FETCH with what the client needs: one
// VANISHED (EARLIER) with exactly wantVanished (none when ""), one FETCH
// per UID in wantFetch with the current flags, MODSEQ and sequence
// number, and no EXPUNGE.
func checkQresyncLines(t *testing.T, lines []string, state map[uint32]flagsFetch, wantVanished string, wantFetch []uint32) {
	t.Helper()
	var vanished []string
	got := map[uint32]flagsFetch{}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "* VANISHED"):
			vanished = append(vanished, l)
		case strings.HasSuffix(l, " EXPUNGE"):
			t.Errorf("EXPUNGE in a QRESYNC resync: %q", l)
		default:
			f, ok := parseFlagsFetch(l)
			if !ok {
				continue
			}
			if _, dup := got[f.UID]; dup {
				t.Errorf("two FETCH responses for UID %d", f.UID)
			}
			got[f.UID] = f
		}
	}
	if wantVanished == "" {
		if len(vanished) != 0 {
			t.Errorf("VANISHED %q, want none", vanished)
		}
	} else if want := "* VANISHED (EARLIER) " + wantVanished; len(vanished) != 1 || vanished[0] != want {
		t.Errorf("VANISHED responses %q, want [%q]", vanished, want)
	}
	for _, uid := range wantFetch {
		if g, ok := got[uid]; !ok {
			t.Errorf("no FETCH for changed UID %d", uid)
		} else if g != state[uid] {
			t.Errorf("FETCH for UID %d: %+v, want %+v", uid, g, state[uid])
		}
	}
	for uid := range got {
		if !slices.Contains(wantFetch, uid) {
			t.Errorf("FETCH for UID %d, which did not change or is not known: %+v", uid, got[uid])
		}
	}
	if t.Failed() {
		t.Logf("responses:\n%s", strings.Join(lines, "\n"))
	}
}

func maxModSeq(state map[uint32]flagsFetch) uint64 {
	var m uint64
	for _, f := range state {
		m = max(m, f.ModSeq)
	}
	return m
}
