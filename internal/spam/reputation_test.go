package spam

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

// repFixture is a real SQLite store with one account and its default
// mailboxes.
type repFixture struct {
	st   *sqlite.Store
	acct int64
}

func newRepFixture(t *testing.T) *repFixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.AddDomain(ctx, "example.com"); err != nil {
		t.Fatal(err)
	}
	a, err := st.AddAccount(ctx, "alice@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	return &repFixture{st: st, acct: a.ID}
}

// put appends a message with the given header lines to a mailbox of the
// account.
func (f *repFixture) put(t *testing.T, mailbox, header string, flags store.Flags, keywords []string, date time.Time) {
	t.Helper()
	ctx := context.Background()
	mb, err := f.st.Mailbox(ctx, f.acct, mailbox)
	if err != nil {
		t.Fatalf("mailbox %s: %v", mailbox, err)
	}
	raw := header + "Subject: test\r\nDate: " + date.Format(time.RFC1123Z) +
		fmt.Sprintf("\r\nMessage-ID: <%d@example.com>\r\n\r\nHello.\r\n", time.Now().UnixNano())
	if _, err := f.st.Append(ctx, mb.ID, []byte(raw), flags, keywords, date); err != nil {
		t.Fatalf("append to %s: %v", mailbox, err)
	}
}

// waitReady waits for the account's summary to be built.
func waitReady(t *testing.T, r *Reputation, acct int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !r.Ready(acct) {
		if time.Now().After(deadline) {
			t.Fatal("reputation summary not built within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReputationClasses(t *testing.T) {
	f := newRepFixture(t)
	now := time.Now()
	old := now.Add(-10 * 24 * time.Hour)
	f.put(t, "Sent", "From: alice@example.com\r\nTo: Friend <Friend@Remote.test>\r\nCc: cc@remote.test, alice@example.com\r\n", store.FlagSeen, nil, now)
	f.put(t, "Junk", "From: Deals <junker@bad.test>\r\nTo: alice@example.com\r\n", 0, []string{"$Junk"}, now)
	f.put(t, "INBOX", "From: kept@old.test\r\nTo: alice@example.com\r\n", store.FlagSeen, nil, old)
	f.put(t, "Archive", "From: archived@old.test\r\nTo: alice@example.com\r\n", store.FlagSeen, nil, old)
	f.put(t, "INBOX", "From: fresh@new.test\r\nTo: alice@example.com\r\n", 0, nil, now)
	f.put(t, "INBOX", "From: replied@new.test\r\nTo: alice@example.com\r\n", store.FlagAnswered, nil, now)
	f.put(t, "INBOX", "From: unread@old.test\r\nTo: alice@example.com\r\n", 0, nil, old)
	f.put(t, "Trash", "From: binned@old.test\r\nTo: alice@example.com\r\n", store.FlagSeen, nil, old)
	// Kept once but junked twice: junk wins.
	f.put(t, "INBOX", "From: mixed@old.test\r\nTo: alice@example.com\r\n", store.FlagSeen, nil, old)
	f.put(t, "Junk", "From: mixed@old.test\r\nTo: alice@example.com\r\n", 0, nil, now)
	f.put(t, "Junk", "From: mixed@old.test\r\nTo: alice@example.com\r\n", 0, nil, now)

	r := NewReputation(f.st, ReputationConfig{Logger: quiet(), MinRefresh: 10 * time.Millisecond})
	defer r.Close()
	waitReady(t, r, f.acct)
	ctx := context.Background()
	for _, c := range []struct {
		sender, reason string
		pts            float64
	}{
		{"friend@remote.test", ReasonCorrespondent, -4},
		{"<FRIEND@remote.test>", ReasonCorrespondent, -4},
		{"cc@remote.test", ReasonCorrespondent, -4},
		{"replied@new.test", ReasonCorrespondent, -4},
		{"kept@old.test", ReasonKept, -2},
		{"archived@old.test", ReasonKept, -2},
		{"junker@bad.test", ReasonJunked, 3},
		{"mixed@old.test", ReasonJunked, 3},
		{"fresh@new.test", "", 0},    // too new to count as kept
		{"binned@old.test", "", 0},   // Trash says nothing
		{"unread@old.test", "", 0},   // never read: not kept
		{"alice@example.com", "", 0}, // the user's own address earns nothing
		{"stranger@nowhere.test", "", 0},
		{"", "", 0},
	} {
		pts, reason, ok := r.Reputation(ctx, f.acct, c.sender)
		if ok != (c.reason != "") || reason != c.reason || pts != c.pts {
			t.Errorf("Reputation(%q) = %v %q %v, want %v %q", c.sender, pts, reason, ok, c.pts, c.reason)
		}
	}
}

// TestReputationInFilter runs the whole filter with the reputation over
// the store: trust only for an authenticated sender, distrust for anyone.
func TestReputationInFilter(t *testing.T) {
	f := newRepFixture(t)
	f.put(t, "Sent", "From: alice@example.com\r\nTo: friend@remote.test\r\n", store.FlagSeen, nil, time.Now())
	f.put(t, "Junk", "From: junker@bad.test\r\nTo: alice@example.com\r\n", 0, nil, time.Now())
	r := NewReputation(f.st, ReputationConfig{Logger: quiet(), MinRefresh: 10 * time.Millisecond})
	defer r.Close()
	waitReady(t, r, f.acct)
	flt, err := New(Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	flt.SetReputation(r)

	msg := func(from string) []byte {
		return []byte("From: " + from + "\r\nTo: alice@example.com\r\nSubject: lunch\r\nDate: " + time.Now().Format(time.RFC1123Z) +
			"\r\nMessage-ID: <1@x.test>\r\n\r\nLunch at noon?\r\n")
	}
	reason := func(v Verdict) (string, float64) {
		for _, h := range v.Hits {
			if strings.HasPrefix(h.Name, "REPUTATION_") {
				return h.Name, h.Score
			}
		}
		return "", 0
	}
	for _, c := range []struct {
		name           string
		from, mailFrom string
		spf, dmarc     string
		wantReason     string
		wantPts        float64
		dkimPass       string
	}{
		{"dmarc pass", "friend@remote.test", "friend@remote.test", "pass", "pass", ReasonCorrespondent, -4, ""},
		{"spf pass, same domain", "Friend <friend@remote.test>", "bounces@mail.remote.test", "pass", "none", ReasonCorrespondent, -4, ""},
		{"spf pass for the envelope sender", "someone@else.test", "friend@remote.test", "pass", "none", ReasonCorrespondent, -4, ""},
		{"dkim pass, aligned", "friend@remote.test", "bounce@esp.test", "none", "none", ReasonCorrespondent, -4, "mail.remote.test"},
		{"dkim pass, not aligned", "friend@remote.test", "bounce@esp.test", "none", "none", ReasonUnverified, 0, "esp.test"},
		{"unauthenticated", "friend@remote.test", "friend@remote.test", "none", "none", ReasonUnverified, 0, ""},
		{"spf fail", "friend@remote.test", "friend@remote.test", "fail", "fail", ReasonUnverified, 0, ""},
		{"spf pass for another domain", "friend@remote.test", "spammer@other.test", "pass", "none", ReasonUnverified, 0, ""},
		{"junk, unauthenticated", "junker@bad.test", "x@y.test", "none", "none", ReasonJunked, 3, ""},
		{"junk, authenticated", "junker@bad.test", "junker@bad.test", "pass", "pass", ReasonJunked, 3, ""},
		{"junk envelope beats trusted From", "friend@remote.test", "junker@bad.test", "pass", "pass", ReasonJunked, 3, ""},
		{"unknown", "stranger@nowhere.test", "stranger@nowhere.test", "pass", "pass", "", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Raw: msg(c.from), Accounts: []int64{f.acct}, MailFrom: c.mailFrom, SPF: c.spf, DMARC: c.dmarc, DKIM: "none"}
			if c.dkimPass != "" {
				in.DKIM, in.DKIMPass = "pass", []string{c.dkimPass}
			}
			other := in
			other.Accounts = []int64{999}
			base, err := flt.Check(context.Background(), other)
			if err != nil {
				t.Fatal(err)
			}
			res, err := flt.Check(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			got, pts := reason(res.Message)
			if got != c.wantReason || pts != c.wantPts {
				t.Fatalf("reputation hit %q %v, want %q %v (hits %v)", got, pts, c.wantReason, c.wantPts, res.Message.Hits)
			}
			// Account 999 has no history (and its summary is not built
			// yet): the score differs by the reputation points exactly.
			if d := res.Message.Score - base.Message.Score; d < c.wantPts-0.001 || d > c.wantPts+0.001 {
				t.Fatalf("score %v vs %v without history: difference %v, want %v", res.Message.Score, base.Message.Score, d, c.wantPts)
			}
			if !strings.Contains(FormatHeaders(res.Message, 4), c.wantReason) {
				t.Fatalf("X-Spam-Status lacks %s:\n%s", c.wantReason, FormatHeaders(res.Message, 4))
			}
		})
	}
}

// TestReputationRefresh: a new message in Sent makes its recipient a
// correspondent without any call but the change feed's.
func TestReputationRefresh(t *testing.T) {
	f := newRepFixture(t)
	r := NewReputation(f.st, ReputationConfig{Logger: quiet(), MinRefresh: 10 * time.Millisecond, JunkRefresh: 50 * time.Millisecond})
	defer r.Close()
	waitReady(t, r, f.acct)
	ctx := context.Background()
	if _, _, ok := r.Reputation(ctx, f.acct, "later@remote.test"); ok {
		t.Fatal("an empty account has an opinion")
	}
	f.put(t, "Sent", "From: alice@example.com\r\nTo: later@remote.test\r\n", store.FlagSeen, nil, time.Now())
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, reason, ok := r.Reputation(ctx, f.acct, "later@remote.test"); ok && reason == ReasonCorrespondent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("summary not refreshed within 10s of the Sent message")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// INBOX deliveries do not rebuild, but a move into Junk does.
	f.put(t, "INBOX", "From: pest@bad.test\r\nTo: alice@example.com\r\n", 0, nil, time.Now())
	inbox, _ := f.st.Mailbox(ctx, f.acct, "INBOX")
	junk, _ := f.st.Mailbox(ctx, f.acct, "Junk")
	if _, err := f.st.Move(ctx, inbox.ID, nil, junk.ID); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		if _, reason, ok := r.Reputation(ctx, f.acct, "pest@bad.test"); ok && reason == ReasonJunked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("summary not refreshed within 10s of the move into Junk")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slowStore holds Mailboxes until released: a scan that takes long.
type slowStore struct {
	*sqlite.Store
	release chan struct{}
}

func (s *slowStore) Mailboxes(ctx context.Context, id int64) ([]store.Mailbox, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Mailboxes(ctx, id)
}

// TestReputationNeverWaits: while an account's history is being read,
// the reputation answers at once with no opinion.
func TestReputationNeverWaits(t *testing.T) {
	f := newRepFixture(t)
	f.put(t, "Sent", "From: alice@example.com\r\nTo: friend@remote.test\r\n", store.FlagSeen, nil, time.Now())
	slow := &slowStore{Store: f.st, release: make(chan struct{})}
	r := NewReputation(slow, ReputationConfig{Logger: quiet(), MinRefresh: 10 * time.Millisecond})
	defer r.Close()
	start := time.Now()
	if _, _, ok := r.Reputation(context.Background(), f.acct, "friend@remote.test"); ok {
		t.Fatal("an opinion before the summary was built")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Reputation waited %v for the scan", d)
	}
	close(slow.release)
	waitReady(t, r, f.acct)
	if _, reason, _ := r.Reputation(context.Background(), f.acct, "friend@remote.test"); reason != ReasonCorrespondent {
		t.Fatalf("after the scan: %q", reason)
	}
}

// TestReputationBounds: the address cap keeps correspondents (Sent is
// read first), and the account cap drops the least recently used.
func TestReputationBounds(t *testing.T) {
	f := newRepFixture(t)
	ctx := context.Background()
	f.put(t, "Sent", "From: alice@example.com\r\nTo: a1@remote.test, a2@remote.test\r\n", store.FlagSeen, nil, time.Now())
	for i := range 5 {
		f.put(t, "Junk", fmt.Sprintf("From: j%d@bad.test\r\nTo: alice@example.com\r\n", i), 0, nil, time.Now())
	}
	acct2, err := f.st.AddAccount(ctx, "bob@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	r := NewReputation(f.st, ReputationConfig{Logger: quiet(), MinRefresh: 10 * time.Millisecond, MaxAddresses: 3, MaxAccounts: 1})
	defer r.Close()
	waitReady(t, r, f.acct)
	s := r.accts[f.acct].sum.Load()
	if len(s.class) != 3 {
		t.Fatalf("%d addresses in the summary, want the cap 3", len(s.class))
	}
	for _, a := range []string{"a1@remote.test", "a2@remote.test"} {
		if _, reason, _ := r.Reputation(ctx, f.acct, a); reason != ReasonCorrespondent {
			t.Errorf("%s: %q, want a correspondent kept under the cap", a, reason)
		}
	}
	waitReady(t, r, acct2.ID)
	r.mu.Lock()
	n, has1 := len(r.accts), r.accts[f.acct] != nil
	r.mu.Unlock()
	if n != 1 || has1 {
		t.Fatalf("%d accounts held (first still held: %v), want only the most recent", n, has1)
	}
}

// BenchmarkReputationBuild reads the history of an account with 20,000
// messages in INBOX (2,000 senders) and 2,000 in Sent: the time of one
// background rebuild (only the newest 2,000 per mailbox are read) and the
// summary's size. `go test ./internal/spam/ -run '^$' -bench ReputationBuild`
func BenchmarkReputationBuild(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(b.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AddDomain(ctx, "example.com"); err != nil {
		b.Fatal(err)
	}
	acct, err := st.AddAccount(ctx, "alice@example.com", "")
	if err != nil {
		b.Fatal(err)
	}
	inbox, _ := st.Mailbox(ctx, acct.ID, "INBOX")
	sent, _ := st.Mailbox(ctx, acct.ID, "Sent")
	old := time.Now().Add(-30 * 24 * time.Hour)
	const nInbox, nSent, workers = 20000, 2000, 16
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := w; i < nInbox+nSent; i += workers {
				mb, hdr := inbox.ID, fmt.Sprintf("From: Sender %d <s%d@host%d.test>\r\nTo: alice@example.com\r\n", i, i%2000, i%97)
				if i >= nInbox {
					mb, hdr = sent.ID, fmt.Sprintf("From: alice@example.com\r\nTo: r%d@remote%d.test\r\nCc: c%d@remote.test\r\n", i, i%13, i%50)
				}
				raw := hdr + fmt.Sprintf("Subject: message %d\r\nMessage-ID: <%d@example.com>\r\n\r\nBody of message %d.\r\n", i, i, i)
				if _, err := st.Append(ctx, mb, []byte(raw), store.FlagSeen, nil, old); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	r := NewReputation(st, ReputationConfig{Logger: quiet()})
	defer r.Close()
	b.ResetTimer()
	var s *repSummary
	for b.Loop() {
		if s, err = r.build(ctx, acct.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(s.class)), "addresses")
}

// BenchmarkReputationLookup is the cost a delivery pays: one lookup in a
// built summary.
func BenchmarkReputationLookup(b *testing.B) {
	r := NewReputation(nil, ReputationConfig{Logger: quiet()})
	s := &repSummary{class: map[uint64]repClass{}, built: time.Now()}
	for i := range 4096 {
		s.class[maphash.String(r.seed, fmt.Sprintf("s%d@host.test", i))] = classKept
	}
	a := &repAccount{id: 1, kick: make(chan struct{}, 1), stop: func() {}}
	a.sum.Store(s)
	a.el = r.lru.PushFront(a)
	r.accts[1] = a
	for b.Loop() {
		if _, _, ok := r.Reputation(context.Background(), 1, "S77@Host.test"); !ok {
			b.Fatal("not found")
		}
	}
}
