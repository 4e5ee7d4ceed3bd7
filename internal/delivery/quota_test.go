package delivery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

// quotaEnv is a message from outside to the given recipients.
func quotaEnv(rcpts ...string) Envelope {
	return Envelope{MailFrom: "sender@remote.test", Recipients: rcpts, RemoteIP: "192.0.2.1"}
}

// storedSize is the size testMessage has in the mailbox.
var storedSize = int64(len("Return-Path: <sender@remote.test>\r\n" + testMessage))

// setQuota sets an account's limit and reloads the directory, which
// carries the limits, as the running server's poll does.
func (f *fixture) setQuota(t *testing.T, addr string, bytes int64) {
	t.Helper()
	ctx := context.Background()
	if err := f.st.SetQuota(ctx, addr, bytes); err != nil {
		t.Fatal(err)
	}
	if err := f.dir.Reload(ctx); err != nil {
		t.Fatal(err)
	}
}

// notices returns the subjects of the quota notices in an INBOX.
func (f *fixture) notices(t *testing.T, addr string) []string {
	t.Helper()
	var out []string
	for _, m := range f.inbox(t, addr) {
		if s := m.Parsed.Envelope.Subject; strings.HasPrefix(s, "Your mailbox is") {
			out = append(out, s)
		}
	}
	return out
}

func TestQuotaRefusesAndAcceptsAfterExpunge(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice := f.ids["alice@example.com"]
	// Room for two messages, not three.
	f.setQuota(t, "alice@example.com", 2*storedSize+storedSize/2)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.pipe.now = func() time.Time { return now }
	for i := range 2 {
		if _, err := f.pipe.Deliver(ctx, quotaEnv("alice@example.com"), []byte(testMessage)); err != nil {
			t.Fatalf("delivery %d under quota: %v", i, err)
		}
	}
	_, err := f.pipe.Deliver(ctx, quotaEnv("alice@example.com"), []byte(testMessage))
	var re *RejectError
	if !errors.As(err, &re) || re.Code != 452 || re.Enhanced != [3]int{4, 2, 2} || !re.Temporary() || re.Message != "mailbox full" {
		t.Fatalf("delivery over quota: %v; want 452 4.2.2 mailbox full", err)
	}
	// The second delivery took alice to 80 %: no warning then; the refusal
	// brought one notice, past the quota, and a retry brings no second.
	if _, err := f.pipe.Deliver(ctx, quotaEnv("alice@example.com"), []byte(testMessage)); !errors.As(err, &re) {
		t.Fatalf("retry over quota: %v; want a refusal", err)
	}
	if got := f.notices(t, "alice@example.com"); len(got) != 1 || got[0] != "Your mailbox is full" {
		t.Fatalf("notices = %q; want one \"Your mailbox is full\"", got)
	}
	if n := len(f.inbox(t, "alice@example.com")); n != 3 {
		t.Fatalf("INBOX holds %d messages; want 2 and the notice", n)
	}

	// The user makes room: expunge everything (the notice counts too),
	// and mail comes in again.
	inbox, err := f.st.Mailbox(ctx, alice, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.StoreFlags(ctx, inbox.ID, nil, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Expunge(ctx, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pipe.Deliver(ctx, quotaEnv("alice@example.com"), []byte(testMessage)); err != nil {
		t.Fatalf("delivery after expunge: %v", err)
	}

	// A day later a refusal brings a new notice.
	if _, err := f.pipe.Deliver(ctx, quotaEnv("alice@example.com"), []byte(testMessage)); err != nil {
		t.Fatalf("second delivery after expunge: %v", err)
	}
	now = now.Add(store.QuotaNoticeInterval)
	if _, err := f.pipe.Deliver(ctx, quotaEnv("alice@example.com"), []byte(testMessage)); !errors.As(err, &re) {
		t.Fatalf("delivery over quota a day later: %v; want a refusal", err)
	}
	if got := f.notices(t, "alice@example.com"); len(got) != 1 || got[0] != "Your mailbox is full" {
		t.Fatalf("notices after a day = %q; want a new one", got)
	}
}

func TestQuotaPartialAndUnlimited(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// alice has no room at all; bob (no limit) shares the alias with her.
	f.setQuota(t, "alice@example.com", storedSize-1)
	got, err := f.pipe.Deliver(ctx, quotaEnv("team@example.com"), []byte(testMessage))
	if err != nil {
		t.Fatalf("delivery to the alias: %v", err)
	}
	if len(got) != 1 || got[0].AccountID != f.ids["bob@example.com"] {
		t.Fatalf("delivered to %+v; want bob only", got)
	}
	if n := len(f.inbox(t, "bob@example.com")); n != 1 {
		t.Fatalf("bob has %d messages; want 1", n)
	}
	if got := f.notices(t, "alice@example.com"); len(got) != 1 {
		t.Fatalf("alice's notices = %q; want one", got)
	}
	// At RCPT time, alice alone is refused; the alias (bob has room) is not.
	if err := f.pipe.CheckQuota(ctx, "alice@example.com", 0); err == nil {
		t.Fatal("CheckQuota(alice) = nil; want a refusal")
	}
	if err := f.pipe.CheckQuota(ctx, "team@example.com", 0); err != nil {
		t.Fatalf("CheckQuota(team) = %v; want nil", err)
	}
	if err := f.pipe.CheckQuota(ctx, "bob@example.com", 1<<30); err != nil {
		t.Fatalf("CheckQuota(bob, unlimited) = %v; want nil", err)
	}
}

func TestQuotaPermanentRefusal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.pipe.WithQuotaPermanent(true)
	f.setQuota(t, "carol@example.com", 10)
	_, err := f.pipe.Deliver(ctx, quotaEnv("carol@example.com"), []byte(testMessage))
	var re *RejectError
	if !errors.As(err, &re) || re.Code != 552 || re.Enhanced != [3]int{5, 2, 2} || re.Temporary() {
		t.Fatalf("permanent refusal: %v; want 552 5.2.2", err)
	}
	if err := f.pipe.CheckQuota(ctx, "carol@example.com", 0); !errors.As(err, &re) || re.Code != 552 {
		t.Fatalf("CheckQuota: %v; want 552", err)
	}
}

func TestQuotaWarningAt90Percent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// One message takes bob to 95 %.
	f.setQuota(t, "bob@example.com", storedSize*100/95)
	if _, err := f.pipe.Deliver(ctx, quotaEnv("bob@example.com"), []byte(testMessage)); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := f.notices(t, "bob@example.com"); len(got) != 1 || got[0] != "Your mailbox is almost full" {
		t.Fatalf("notices = %q; want one \"Your mailbox is almost full\"", got)
	}
	raw, err := f.st.ReadBlob(ctx, f.inbox(t, "bob@example.com")[1].BlobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Auto-Submitted: auto-generated\r\n", "To: <bob@example.com>\r\n", "(95 %)"} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("notice lacks %q:\n%s", want, raw)
		}
	}
}
