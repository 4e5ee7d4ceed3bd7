package blackbox

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// seqModel is one session's view of the selected mailbox as the client
// builds it from the server's responses alone: the UID at each sequence
// number (0 while not yet learned after an EXISTS).
type seqModel struct {
	uids []uint32
	errs []string
	// checked counts FETCH responses compared with a known UID, expunges
	// the EXPUNGE responses applied.
	checked, expunges int
}

var (
	existsRe   = regexp.MustCompile(`^\* (\d+) EXISTS$`)
	expungeRe  = regexp.MustCompile(`^\* (\d+) EXPUNGE$`)
	seqFetchRe = regexp.MustCompile(`^\* (\d+) FETCH \(.*\bUID (\d+)\b`)
)

func (m *seqModel) errorf(format string, args ...any) {
	if len(m.errs) < 20 {
		m.errs = append(m.errs, fmt.Sprintf(format, args...))
	}
}

// apply updates the model with the untagged responses of one command,
// in order (RFC 9051 §7.5.1: after "* n EXPUNGE" every later message's
// sequence number is one less; §7.4.1: EXISTS). noExpunge says the
// command was FETCH, STORE or SEARCH, during which the server must not
// send EXPUNGE (RFC 9051 §7.5.1).
func (m *seqModel) apply(cmd string, lines []string, noExpunge bool) {
	for _, l := range lines {
		if s := existsRe.FindStringSubmatch(l); s != nil {
			n, _ := strconv.Atoi(s[1])
			if n < len(m.uids) {
				m.errorf("%s: * %d EXISTS with %d messages known: EXISTS never shrinks the mailbox", cmd, n, len(m.uids))
				continue
			}
			for len(m.uids) < n {
				m.uids = append(m.uids, 0)
			}
		} else if s := expungeRe.FindStringSubmatch(l); s != nil {
			n, _ := strconv.Atoi(s[1])
			if noExpunge {
				m.errorf("%s: %q during FETCH, STORE or SEARCH (RFC 9051 §7.5.1)", cmd, l)
			}
			if n < 1 || n > len(m.uids) {
				m.errorf("%s: %q with %d messages", cmd, l, len(m.uids))
				continue
			}
			m.uids = slices.Delete(m.uids, n-1, n)
			m.expunges++
		} else if s := seqFetchRe.FindStringSubmatch(l); s != nil {
			n, _ := strconv.Atoi(s[1])
			uid64, _ := strconv.ParseUint(s[2], 10, 32)
			uid := uint32(uid64)
			switch {
			case n < 1 || n > len(m.uids):
				m.errorf("%s: %q with %d messages", cmd, l, len(m.uids))
			case m.uids[n-1] == 0:
				m.uids[n-1] = uid
			case m.uids[n-1] != uid:
				m.errorf("%s: %q but sequence number %d is UID %d here", cmd, l, n, m.uids[n-1])
			default:
				m.checked++
			}
		}
	}
}

// TestIMAPConcurrentSequenceNumbers: six sessions on one mailbox flag,
// expunge, append and fetch at the same time, by sequence number and by
// UID. Each keeps the sequence-number-to-UID map a client builds from
// the server's EXISTS, EXPUNGE and FETCH responses; every FETCH that
// names a UID must agree with it, no EXPUNGE may come during FETCH,
// STORE or SEARCH, and at the end every session's map must be the
// mailbox as it is (RFC 9051 §2.3.1.2, §7.5.1).
func TestIMAPConcurrentSequenceNumbers(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	user := srv.AddAccounts("seqnum")[0]
	srv.Start()
	var msgs [][]byte
	for i := range 120 {
		msgs = append(msgs, generatedMessage("seqnum", i, 300))
	}
	appendAll(t, srv, user, "INBOX", msgs)

	const sessions, rounds = 6, 40
	models := make([]*seqModel, sessions)
	conns := make([]*imapConn, sessions)
	for i := range sessions {
		ic := dialIMAP(t, srv.IMAP)
		ic.login(user)
		if i%2 == 1 {
			// CONDSTORE sessions get UID in every FETCH (RFC 7162 §3.2.4
			// does not apply: no QRESYNC, so EXPUNGE, not VANISHED).
			ic.expectStatus("E", "ENABLE CONDSTORE", "OK")
		}
		ic.expectStatus("S", "SELECT INBOX", "OK")
		m := &seqModel{}
		st, lines, err := ic.command("F0", "FETCH 1:* (UID)")
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("FETCH 1:* (UID): %q %v", st, err)
		}
		m.uids = make([]uint32, len(msgs))
		m.apply("FETCH 1:* (UID)", lines, true)
		models[i], conns[i] = m, ic
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	var nextMsg = len(msgs)
	fail := make([]error, sessions)
	for si := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ic, m := conns[si], models[si]
			rng := rand.New(rand.NewPCG(uint64(si), 7))
			run := func(tag, cmd string, noExpunge bool) bool {
				st, lines, err := ic.command(tag, cmd)
				if err != nil {
					fail[si] = fmt.Errorf("%s: %v", cmd, err)
					return false
				}
				// A NO is allowed: a message another session just
				// expunged can make a command by sequence number fail.
				_ = st
				m.apply(cmd, lines, noExpunge)
				return true
			}
			for r := range rounds {
				tag := fmt.Sprintf("R%d", r)
				// Learn the UIDs of messages announced by EXISTS.
				if i := slices.Index(m.uids, 0); i >= 0 {
					if !run(tag+"u", fmt.Sprintf("FETCH %d:* (UID)", i+1), true) {
						return
					}
				}
				n := len(m.uids)
				if n == 0 {
					break
				}
				seq := rng.IntN(n) + 1
				switch op := rng.IntN(6); op {
				case 0: // by sequence number: the answer must name the UID the model has
					if !run(tag, fmt.Sprintf("FETCH %d (UID FLAGS)", seq), true) {
						return
					}
				case 1:
					if !run(tag, fmt.Sprintf(`STORE %d +FLAGS (\Flagged)`, seq), true) {
						return
					}
				case 2: // expunge one message by UID
					uid := m.uids[seq-1]
					if uid == 0 {
						continue
					}
					if !run(tag+"d", fmt.Sprintf(`UID STORE %d +FLAGS.SILENT (\Deleted)`, uid), false) ||
						!run(tag, fmt.Sprintf("UID EXPUNGE %d", uid), false) {
						return
					}
				case 3:
					mu.Lock()
					k := nextMsg
					nextMsg++
					mu.Unlock()
					body := generatedMessage("seqnum", k, 300)
					head := fmt.Sprintf("%s APPEND INBOX {%d+}\r\n", tag, len(body))
					if err := ic.write(head + string(body) + "\r\n"); err != nil {
						fail[si] = err
						return
					}
					st, lines, err := ic.tagged(tag)
					if err != nil || !strings.HasPrefix(st, "OK") {
						fail[si] = fmt.Errorf("APPEND: %q %v", st, err)
						return
					}
					m.apply("APPEND", lines, false)
				case 4:
					if !run(tag, "NOOP", false) {
						return
					}
				case 5:
					if !run(tag, fmt.Sprintf("SEARCH %d:*", seq), true) {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for si, err := range fail {
		if err != nil {
			t.Fatalf("session %d: %v", si, err)
		}
	}

	// Quiesce: every session hears about everything, learns the UIDs of
	// new messages, and its map must then be the mailbox as it is.
	truth := dialIMAP(t, srv.IMAP)
	truth.login(user)
	truth.expectStatus("T1", "EXAMINE INBOX", "OK")
	want := uidSearch(t, truth, "T2", "ALL")
	for si := range sessions {
		ic, m := conns[si], models[si]
		st, lines, err := ic.command("Z1", "NOOP")
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("session %d: NOOP: %q %v", si, st, err)
		}
		m.apply("NOOP", lines, false)
		st, lines, err = ic.command("Z2", "FETCH 1:* (UID)")
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("session %d: FETCH 1:* (UID): %q %v", si, st, err)
		}
		m.apply("FETCH 1:* (UID)", lines, true)
		for _, e := range m.errs {
			t.Errorf("session %d: %s", si, e)
		}
		if !slices.Equal(m.uids, want) {
			t.Errorf("session %d: its map has %d messages, the mailbox %d; first difference at %d",
				si, len(m.uids), len(want), firstUIDDiff(m.uids, want))
		}
	}
	checked, expunges := 0, 0
	for _, m := range models {
		checked, expunges = checked+m.checked, expunges+m.expunges
	}
	t.Logf("%d sessions × %d rounds: %d messages at the end (started with %d, %d appended); %d FETCH responses checked against the sessions' maps, %d EXPUNGE responses applied",
		sessions, rounds, len(want), len(msgs), nextMsg-len(msgs), checked, expunges)
}

func firstUIDDiff(a, b []uint32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i + 1
		}
	}
	return min(len(a), len(b)) + 1
}
