package delivery

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

// sieveFixture is the delivery fixture with Sieve on and a recording
// outbound queue.
func sieveFixture(t *testing.T) (*fixture, *recorder) {
	t.Helper()
	f := newFixture(t)
	rec := &recorder{}
	f.pipe.WithForwarding(rec, testSRS(t)).WithSieve(SieveConfig{Store: f.st})
	return f, rec
}

func (f *fixture) script(t *testing.T, addr, src string) {
	t.Helper()
	ctx := context.Background()
	if err := f.st.PutSieveScript(ctx, f.ids[addr], "rules", src); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetActiveSieveScript(ctx, f.ids[addr], "rules"); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) box(t *testing.T, addr, name string) []store.MessageMeta {
	t.Helper()
	ctx := context.Background()
	mb, err := f.st.Mailbox(ctx, f.ids[addr], name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := f.st.Fetch(ctx, mb.ID, nil, store.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func (f *fixture) deliver(t *testing.T, from string, to []string, raw string) error {
	t.Helper()
	_, err := f.pipe.Deliver(context.Background(), Envelope{MailFrom: from, Recipients: to, RemoteIP: "192.0.2.1"}, []byte(raw))
	return err
}

func TestSieveFileintoFlagsAndCreate(t *testing.T) {
	f, _ := sieveFixture(t)
	f.script(t, "alice@example.com", `require ["fileinto", "imap4flags", "mailbox"];
if header :contains "subject" "hello" {
    addflag ["\\Flagged", "$Work", "bad(flag"];
    fileinto :create "Lists/Hello";
    fileinto "Archive";
    fileinto "Nonexistent";
}`)
	if err := f.deliver(t, "sender@remote.test", []string{"alice@example.com", "bob@example.com"}, testMessage); err != nil {
		t.Fatal(err)
	}
	got := f.box(t, "alice@example.com", "Lists/Hello")
	if len(got) != 1 || got[0].Flags != store.FlagFlagged || len(got[0].Keywords) != 1 || got[0].Keywords[0] != "$Work" {
		t.Fatalf("Lists/Hello: %+v", got)
	}
	// RFC 5490 §3.2: the mailbox :create made is subscribed.
	subs, err := f.st.Subscriptions(context.Background(), f.ids["alice@example.com"])
	if err != nil || !slices.Contains(subs, "Lists/Hello") {
		t.Fatalf("subscriptions after fileinto :create: %q %v", subs, err)
	}
	if n := len(f.box(t, "alice@example.com", "Archive")); n != 1 {
		t.Fatalf("Archive has %d messages", n)
	}
	// fileinto a missing mailbox without :create: kept in INBOX.
	if n := len(f.inbox(t, "alice@example.com")); n != 1 {
		t.Fatalf("alice's INBOX has %d messages; want the one of the missing mailbox", n)
	}
	if f.box(t, "alice@example.com", "Nonexistent") != nil {
		t.Fatal("fileinto without :create made a mailbox")
	}
	// Bob has no script: INBOX, unflagged.
	if in := f.inbox(t, "bob@example.com"); len(in) != 1 || in[0].Flags != 0 {
		t.Fatalf("bob's INBOX: %+v", in)
	}
}

func TestSieveDiscardAndBrokenScript(t *testing.T) {
	f, _ := sieveFixture(t)
	f.script(t, "alice@example.com", `discard;`)
	// A script the parser refuses (stored by an older version, say)
	// keeps the message.
	if err := f.st.PutSieveScript(context.Background(), f.ids["bob@example.com"], "broken", "fileinto \"x\";"); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetActiveSieveScript(context.Background(), f.ids["bob@example.com"], "broken"); err != nil {
		t.Fatal(err)
	}
	if err := f.deliver(t, "sender@remote.test", []string{"team@example.com"}, testMessage); err != nil {
		t.Fatal(err)
	}
	if n := len(f.inbox(t, "alice@example.com")); n != 0 {
		t.Fatalf("discard: alice has %d", n)
	}
	if n := len(f.inbox(t, "bob@example.com")); n != 1 {
		t.Fatalf("broken script: bob has %d; want the message kept", n)
	}
	// A run-time failure (too many redirects) keeps it too.
	f.script(t, "alice@example.com", `redirect "a@remote.test"; redirect "b@remote.test"; redirect "c@remote.test"; redirect "d@remote.test"; redirect "e@remote.test";`)
	if err := f.deliver(t, "sender@remote.test", []string{"alice@example.com"}, testMessage); err != nil {
		t.Fatal(err)
	}
	if n := len(f.inbox(t, "alice@example.com")); n != 1 {
		t.Fatalf("failed run: alice has %d; want 1", n)
	}
}

func TestSieveRejectAtSMTP(t *testing.T) {
	f, _ := sieveFixture(t)
	f.script(t, "alice@example.com", `require "reject"; reject "I don't want mail from you";`)
	err := f.deliver(t, "sender@remote.test", []string{"alice@example.com"}, testMessage)
	var re *RejectError
	if !errors.As(err, &re) || re.Code != 550 || re.Enhanced != [3]int{5, 7, 1} || re.Message != "I don't want mail from you" {
		t.Fatalf("reject: %v", err)
	}
	// A reason an SMTP reply cannot carry is replaced.
	f.script(t, "alice@example.com", `require "ereject"; ereject "Ne m'écrivez plus";`)
	err = f.deliver(t, "sender@remote.test", []string{"alice@example.com"}, testMessage)
	if !errors.As(err, &re) || re.Message != "Message refused by the recipient's filter" {
		t.Fatalf("ereject with non-ASCII reason: %v", err)
	}
	// With another recipient accepting, the message is delivered to it;
	// the sender is not verified (no SPF pass), so no notice goes out.
	if err := f.deliver(t, "sender@remote.test", []string{"alice@example.com", "bob@example.com"}, testMessage); err != nil {
		t.Fatal(err)
	}
	if a, b := len(f.inbox(t, "alice@example.com")), len(f.inbox(t, "bob@example.com")); a != 0 || b != 1 {
		t.Fatalf("partial reject: alice %d, bob %d", a, b)
	}
	if n := len(f.inbox(t, "carol@example.com")); n != 0 {
		t.Fatal(n)
	}
	// From inside (a logged-in sender), the refusal is a notice to the
	// sender instead of an SMTP error.
	_, err = f.pipe.Deliver(context.Background(), Envelope{MailFrom: "carol@example.com", Recipients: []string{"alice@example.com"}, Authenticated: true}, []byte(testMessage))
	if err != nil {
		t.Fatal(err)
	}
	notice := f.inbox(t, "carol@example.com")
	if len(notice) != 1 {
		t.Fatalf("carol got %d notices", len(notice))
	}
	raw, _ := f.st.ReadBlob(context.Background(), notice[0].BlobID)
	for _, want := range []string{"Auto-Submitted: auto-replied", "report-type=delivery-status", "Status: 5.7.1", "Ne m'", "Subject: Message refused"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("notice lacks %q:\n%s", want, raw)
		}
	}
}

func TestSieveRedirect(t *testing.T) {
	f, rec := sieveFixture(t)
	f.script(t, "alice@example.com", `require "copy"; redirect "someone@remote.test"; redirect :copy "bob@example.com";`)
	if err := f.deliver(t, "sender@remote.test", []string{"alice@example.com"}, testMessage); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 1 || rec.got[0].rcpts[0] != "someone@remote.test" {
		t.Fatalf("queued: %+v", rec.got)
	}
	q := rec.got[0]
	if !strings.HasPrefix(q.from, "SRS0=") || !strings.HasSuffix(q.from, "@example.com") {
		t.Errorf("redirect envelope sender %q; want an SRS address at example.com", q.from)
	}
	if !strings.HasPrefix(string(q.raw), "X-Sieve-Redirected-From: alice@example.com\r\nReceived: from mx.remote.test") {
		t.Errorf("redirected message starts %q", string(q.raw)[:80])
	}
	if n := len(f.inbox(t, "alice@example.com")); n != 0 {
		t.Errorf("redirect without :copy left %d in alice's INBOX", n)
	}
	if n := len(f.inbox(t, "bob@example.com")); n != 1 {
		t.Errorf("local redirect: bob has %d", n)
	}
	// A loop between two accounts stops at the second pass: the message
	// is kept there.
	f.script(t, "alice@example.com", `redirect "bob@example.com";`)
	f.script(t, "bob@example.com", `redirect "alice@example.com";`)
	if err := f.deliver(t, "sender@remote.test", []string{"alice@example.com"}, testMessage); err != nil {
		t.Fatal(err)
	}
	if a, b := len(f.inbox(t, "alice@example.com")), len(f.inbox(t, "bob@example.com")); a != 1 || b != 1 {
		t.Errorf("loop: alice %d, bob %d; want the message kept by alice on its return", a, b)
	}
	// The queue failing: the message is kept, not lost.
	rec.fail = errors.New("queue down")
	f.script(t, "carol@example.com", `redirect "x@remote.test";`)
	if err := f.deliver(t, "sender@remote.test", []string{"carol@example.com"}, testMessage); err != nil {
		t.Fatal(err)
	}
	if n := len(f.inbox(t, "carol@example.com")); n != 1 {
		t.Errorf("queue failure: carol has %d", n)
	}
}

func TestSieveVacationOncePerSender(t *testing.T) {
	f, rec := sieveFixture(t)
	f.script(t, "alice@example.com", `require "vacation"; vacation :days 2 :subject "Away" "Back on Monday.";`)
	now := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	f.pipe.now = func() time.Time { return now }
	msg := strings.Replace(testMessage, "To: team@example.com", "To: alice@example.com", 1)
	send := func(from, raw string) {
		t.Helper()
		if err := f.deliver(t, from, []string{"alice@example.com"}, raw); err != nil {
			t.Fatal(err)
		}
	}
	send("sender@remote.test", msg)
	send("sender@remote.test", msg)
	if len(rec.got) != 1 {
		t.Fatalf("two messages from one sender: %d replies; want 1", len(rec.got))
	}
	r := rec.got[0]
	if r.from != "" || r.rcpts[0] != "sender@remote.test" {
		t.Errorf("reply envelope %q → %v; want the null sender to the sender", r.from, r.rcpts)
	}
	for _, want := range []string{"From: <alice@example.com>", "To: <sender@remote.test>", "Subject: Away",
		"In-Reply-To: <m1@remote.test>", "Auto-Submitted: auto-replied", "Back on Monday."} {
		if !strings.Contains(string(r.raw), want) {
			t.Errorf("reply lacks %q:\n%s", want, r.raw)
		}
	}
	// After :days, another reply.
	now = now.Add(49 * time.Hour)
	send("sender@remote.test", msg)
	if len(rec.got) != 2 {
		t.Fatalf("after 2 days: %d replies; want 2", len(rec.got))
	}
	// Never to lists, automatic mail or the null sender.
	send("other@remote.test", strings.Replace(msg, "Subject:", "List-Id: <l.remote.test>\r\nSubject:", 1))
	send("other@remote.test", strings.Replace(msg, "Subject:", "Auto-Submitted: auto-generated\r\nSubject:", 1))
	send("other@remote.test", strings.Replace(msg, "Subject:", "Precedence: bulk\r\nSubject:", 1))
	send("", msg)
	if len(rec.got) != 2 {
		t.Fatalf("lists, automatic mail and bounces got replies: %d", len(rec.got))
	}
	if n := len(f.inbox(t, "alice@example.com")); n != 7 {
		t.Errorf("alice has %d messages; want all 7 kept", n)
	}
}

func TestSpamtestScale(t *testing.T) {
	for _, c := range []struct {
		score         float64
		value, percnt int
	}{{-3, 1, 0}, {0, 1, 0}, {2, 3, 25}, {4, 5, 50}, {8, 7, 75}, {12, 10, 100}, {40, 10, 100}} {
		s := spamtestScore(c.score, 4, 12)
		if !s.Tested || s.Value != c.value || s.Percent != c.percnt {
			t.Errorf("score %v: %+v; want %d, %d%%", c.score, s, c.value, c.percnt)
		}
	}
}
