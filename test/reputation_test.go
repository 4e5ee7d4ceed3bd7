package blackbox

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// TestSpamSenderReputation: the real server with sender authentication
// against a test DNS server (remote.test publishes SPF allowing loopback
// and DMARC p=none; noauth.test publishes nothing), scoring with the
// rules alone (no shipped base model, junk threshold 3, so that the
// scores do not depend on a classifier). A borderline message (capital
// Subject, no Date, no Message-ID, a link to an IP address: 3.2 points)
// from x@remote.test is filed in Junk. The user then keeps a Sent copy
// (IMAP APPEND) of a message to x@remote.test, Cc z@noauth.test. The same
// kind of message from x now scores 4 points less, shows
// REPUTATION_CORRESPONDENT and reaches INBOX; from z (unauthenticated) it
// earns no trust (REPUTATION_UNVERIFIED, 0 points) and stays in Junk; from
// j@remote.test, whose earlier mail is in Junk, it scores 3 more
// (REPUTATION_JUNKED).
func TestSpamSenderReputation(t *testing.T) {
	t.Parallel()
	zone := startTestDNS(t)
	zone.add(t, `
remote.test. 300 IN TXT "v=spf1 ip4:127.0.0.0/8 -all"
_dmarc.remote.test. 300 IN TXT "v=DMARC1; p=none"
`)
	srv := NewServer(t, fmt.Sprintf(`[dns]
servers = [%q]
timeout = "2s"
[auth]
enabled = true
trust_loopback = false
[spam]
no_shipped_model = true
junk_threshold = 3
`, zone.addr))
	user := srv.AddAccounts("rep")[0]
	srv.Start()
	c := imapLogin(t, srv.IMAP, user, &imapclient.Options{})

	n := 0
	// deliver sends one borderline message from sender and returns where
	// it landed and its X-Spam-Status (unfolded).
	var lastHeader string
	deliver := func(sender string) (mailbox, status string) {
		t.Helper()
		n++
		subject := fmt.Sprintf("SPECIAL OFFER FOR YOU NUMBER %s", strings.Repeat("X", n))
		msg := "From: " + sender + "\r\nTo: " + user + "\r\nSubject: " + subject + "\r\n\r\n" +
			"See the offer at http://192.0.2.7/offer before it ends.\r\n"
		s := dialSMTP(t, srv.SMTP)
		s.send(sender, []string{user}, []byte(msg))
		s.Close()
		for _, mb := range []string{"INBOX", "Junk"} {
			if m := waitMessage(t, c, mb, subject, 0); m != "" {
				lastHeader = headerOf(m)
				return mb, spamStatus(t, m)
			}
		}
		t.Fatalf("message from %s not found in INBOX or Junk\n%s", sender, srv.Logs())
		return "", ""
	}

	mb, st0 := deliver("x@remote.test")
	if mb != "Junk" || strings.Contains(st0, "REPUTATION_") {
		t.Fatalf("first message from x: %s, %s", mb, st0)
	}
	if ar := authResults(lastHeader, "test.local"); len(ar) != 1 || !strings.Contains(ar[0], "spf=pass") || !strings.Contains(ar[0], "dmarc=pass") {
		t.Fatalf("x@remote.test is not authenticated: %q", ar)
	}
	score0 := spamScore(t, st0)
	if mb, st := deliver("j@remote.test"); mb != "Junk" || !near(spamScore(t, st), score0) {
		t.Fatalf("first message from j: %s, %s (x scored %v)", mb, st, score0)
	}
	if mb, st := deliver("z@noauth.test"); mb != "Junk" {
		t.Fatalf("first message from z: %s, %s", mb, st)
	}

	// The user writes to x and z: a Sent copy, as a mail client keeps it.
	sent := "From: " + user + "\r\nTo: X <x@remote.test>\r\nCc: z@noauth.test\r\nSubject: hello\r\n" +
		"Date: " + time.Now().Format(time.RFC1123Z) + "\r\nMessage-ID: <rep1@test.local>\r\n\r\nHello there.\r\n"
	ap := c.Append("Sent", int64(len(sent)), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagSeen}})
	if _, err := ap.Write([]byte(sent)); err != nil {
		t.Fatal(err)
	}
	if err := ap.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ap.Wait(); err != nil {
		t.Fatalf("APPEND to Sent: %v", err)
	}

	// The summary is rebuilt in the background after the change to
	// Sent (about a second, at most one rebuild a second); until then a
	// message scores as before, or, when the rebuild that saw x's first
	// message in Junk comes before the one that sees Sent, as a junked
	// sender's (REPUTATION_JUNKED).
	var st1 string
	deadline := time.Now().Add(30 * time.Second)
	for {
		mb, st1 = deliver("x@remote.test")
		if strings.Contains(st1, "REPUTATION_CORRESPONDENT=-4.00") {
			break
		}
		early := strings.ReplaceAll(st1, "REPUTATION_JUNKED=3.00", "")
		if strings.Contains(early, "REPUTATION_") || time.Now().After(deadline) {
			t.Fatalf("message from x after writing to x: %s, %s\n%s", mb, st1, srv.Logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("x before: Junk, %s", st0)
	t.Logf("x after writing to x: %s, %s", mb, st1)
	if mb != "INBOX" || !near(spamScore(t, st1), score0-4) {
		t.Fatalf("message from a correspondent: %s, score %v, want INBOX and %v: %s", mb, spamScore(t, st1), score0-4, st1)
	}

	// z is a correspondent too, but noauth.test has no SPF or DMARC:
	// anyone could have sent this.
	mb, st := deliver("z@noauth.test")
	if mb != "Junk" || !strings.Contains(st, "REPUTATION_UNVERIFIED=0.00") || strings.Contains(st, "CORRESPONDENT") {
		t.Fatalf("unauthenticated message from correspondent z: %s, %s", mb, st)
	}
	t.Logf("z after writing to z: %s, %s", mb, st)
	// j's mail is in Junk: 3 points more than the same message scored
	// before.
	mb, st = deliver("j@remote.test")
	if mb != "Junk" || !strings.Contains(st, "REPUTATION_JUNKED=3.00") || !near(spamScore(t, st), score0+3) {
		t.Fatalf("message from junked j: %s, %s (want score %v)", mb, st, score0+3)
	}
	t.Logf("j after its mail was filed in Junk: %s, %s", mb, st)
	// The reasons are in the delivery log too.
	if !strings.Contains(srv.Logs(), "REPUTATION_CORRESPONDENT=-4.00") {
		t.Errorf("the server log has no REPUTATION_CORRESPONDENT reason")
	}
}

// spamStatus is the unfolded X-Spam-Status field of a message.
func spamStatus(t *testing.T, msg string) string {
	t.Helper()
	h := strings.NewReplacer("\r\n\t", " ", "\r\n ", " ").Replace(headerOf(msg))
	for _, line := range strings.Split(h, "\r\n") {
		if name, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "X-Spam-Status") {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no X-Spam-Status field:\n%s", headerOf(msg))
	return ""
}

// near compares scores printed with two decimals.
func near(a, b float64) bool { return math.Abs(a-b) < 0.005 }

var scoreRe = regexp.MustCompile(`\bscore=(-?[0-9.]+)`)

// spamScore is the score= of an X-Spam-Status value, in hundredths as
// printed (so that scores compare exactly).
func spamScore(t *testing.T, status string) float64 {
	t.Helper()
	m := scoreRe.FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("no score in X-Spam-Status %q", status)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
