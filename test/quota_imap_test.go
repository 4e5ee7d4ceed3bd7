package blackbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestIMAPQuotaCopyMove fills an account up to its quota (`pimail account
// quota`) and checks over IMAP that COPY and APPEND past the STORAGE limit
// fail with NO [OVERQUOTA] (RFC 9208 §4.3, RFC 5530 §3) and store nothing —
// a COPY of two messages of which one would fit copies neither
// (RFC 9051 §6.4.7) — while a COPY that fits works and a MOVE within the
// account, which does not change the usage, works at the limit, so a
// full user can still move mail to Trash. The usage GETQUOTA reports does
// not move on a refusal.
func TestIMAPQuotaCopyMove(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "[spam]\nenabled = false\n")
	user := srv.AddAccounts("full")[0]
	srv.Admin("account", "quota", user, "100M")
	srv.Start()
	const size = 20000
	s := dialSMTP(t, srv.SMTP)
	for i := range 3 {
		s.send("sender@example.org", []string{user}, generatedMessage("quota", i, size))
	}
	s.expect("QUIT", 221)

	ic := dialIMAP(t, srv.IMAP)
	ic.login(user)
	usage := func(tag string) int {
		t.Helper()
		_, untagged, err := ic.command(tag, `GETQUOTA ""`)
		m := regexp.MustCompile(`^\* QUOTA "" \(STORAGE (\d+) (\d+)\)$`).FindStringSubmatch(strings.Join(untagged, "\n"))
		if err != nil || m == nil {
			t.Fatalf("GETQUOTA: %q %v", untagged, err)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	used := usage("q0")
	// Room for one more copy of a message (≈ 20.5 KB), not two.
	limitKiB := used + 30
	srv.Admin("account", "quota", user, fmt.Sprintf("%dK", limitKiB))
	count := func(tag, mailbox string) string {
		t.Helper()
		_, untagged, err := ic.command(tag, "STATUS "+mailbox+" (MESSAGES)")
		if err != nil || len(untagged) != 1 {
			t.Fatalf("STATUS %s: %q %v", mailbox, untagged, err)
		}
		return untagged[0]
	}

	ic.expectStatus("s1", "SELECT INBOX", "OK")
	if st := ic.expectStatus("c1", "COPY 1:2 Archive", "NO"); !strings.HasPrefix(st, "NO [OVERQUOTA]") {
		t.Fatalf("COPY of two messages over quota: %q", st)
	}
	if got := count("n1", "Archive"); got != "* STATUS Archive (MESSAGES 0)" {
		t.Fatalf("the refused COPY stored something: %q", got)
	}
	if got := usage("q1"); got != used {
		t.Fatalf("usage moved from %d to %d KiB after a refused COPY", used, got)
	}
	if st := ic.expectStatus("c2", "UID COPY 1 Archive", "OK"); !strings.HasPrefix(st, "OK [COPYUID ") {
		t.Fatalf("COPY within quota: %q", st)
	}
	if st := ic.expectStatus("c3", "COPY 2 Archive", "NO"); !strings.HasPrefix(st, "NO [OVERQUOTA]") {
		t.Fatalf("COPY over quota: %q", st)
	}
	msg := string(generatedMessage("appended", 9, size))
	if err := ic.write(fmt.Sprintf("a1 APPEND Archive {%d+}\r\n%s\r\n", len(msg), msg)); err != nil {
		t.Fatal(err)
	}
	if st, _, err := ic.tagged("a1"); err != nil || !strings.HasPrefix(st, "NO [OVERQUOTA]") {
		t.Fatalf("APPEND over quota: %q %v", st, err)
	}
	full := usage("q2")
	if got := count("n2", "Archive"); got != "* STATUS Archive (MESSAGES 1)" {
		t.Fatalf("after the refusals: %q", got)
	}
	// At the limit, MOVE still works and does not change the usage.
	ic.expectStatus("m1", "UID MOVE 3 Trash", "OK")
	if got := count("n3", "Trash"); got != "* STATUS Trash (MESSAGES 1)" {
		t.Fatalf("MOVE at quota: %q", got)
	}
	if got := usage("q3"); got != full {
		t.Fatalf("usage after MOVE %d KiB, before %d", got, full)
	}
	if got := count("n4", "INBOX"); got != "* STATUS INBOX (MESSAGES 2)" {
		t.Fatalf("INBOX after MOVE: %q", got)
	}
	// Deleting makes room: the refused COPY now works.
	ic.expectStatus("s2", "SELECT Trash", "OK")
	ic.expectStatus("d1", `STORE 1 +FLAGS.SILENT (\Deleted)`, "OK")
	ic.expectStatus("e1", "EXPUNGE", "OK")
	ic.expectStatus("s3", "SELECT INBOX", "OK")
	ic.expectStatus("c4", "COPY 2 Archive", "OK")
	t.Logf("limit %d KiB: used %d KiB before, %d at the limit", limitKiB, used, full)
}
