package imapd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"pimail/internal/store"
)

// fakeTrainer records the decisions the server reports.
type fakeTrainer struct {
	mu  sync.Mutex
	got []string // "account/blob/spam|ham"
}

func (f *fakeTrainer) Junk(accountID, blobID int64, spam bool) {
	class := "ham"
	if spam {
		class = "spam"
	}
	f.mu.Lock()
	f.got = append(f.got, fmt.Sprintf("%d/%d/%s", accountID, blobID, class))
	f.mu.Unlock()
}

func (f *fakeTrainer) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.got
	f.got = nil
	return out
}

func blobOf(t *testing.T, st store.Store, d store.Delivered) int64 {
	t.Helper()
	m, err := st.Fetch(context.Background(), d.MailboxID, store.UIDSet{{Start: d.UID, Stop: d.UID}}, store.FetchOptions{})
	if err != nil || len(m) != 1 {
		t.Fatalf("fetch: %v %v", m, err)
	}
	return m[0].BlobID
}

func TestJunkTrainingHooks(t *testing.T) {
	tr := &fakeTrainer{}
	env := newTestEnv(t, Config{Junk: tr})
	msg := func(n int) string {
		return fmt.Sprintf("From: a@b.test\r\nSubject: m%d\r\nMessage-ID: <%d@b.test>\r\n\r\nbody %d\r\n", n, n, n)
	}
	d1 := env.deliver("INBOX", msg(1))
	d2 := env.deliver("INBOX", msg(2))
	d3 := env.deliver("INBOX", msg(3))
	b1, b2, b3 := blobOf(t, env.st, d1), blobOf(t, env.st, d2), blobOf(t, env.st, d3)
	id := env.acct.ID
	want := func(step string, exp ...string) {
		t.Helper()
		got := tr.take()
		if strings.Join(got, " ") != strings.Join(exp, " ") {
			t.Fatalf("%s: trainer got %v, want %v", step, got, exp)
		}
	}
	r := env.raw()
	r.login()
	r.cmd("S", "SELECT INBOX")

	// Flags that say nothing about junk, and copies between ordinary
	// mailboxes, train nothing.
	mustOK(t, r.cmd("A", "STORE 1 +FLAGS (\\Seen $Important)"))
	mustOK(t, r.cmd("B", "COPY 1 Archive"))
	want("neutral")

	// MOVE into Junk: spam.
	mustOK(t, r.cmd("C", "MOVE 1 Junk"))
	want("move to Junk", fmt.Sprintf("%d/%d/spam", id, b1))
	// STORE $Junk in INBOX: spam; $NotJunk: ham; removing says nothing.
	mustOK(t, r.cmd("D", "UID STORE "+fmt.Sprint(d2.UID)+" +FLAGS.SILENT ($Junk)"))
	want("$Junk", fmt.Sprintf("%d/%d/spam", id, b2))
	mustOK(t, r.cmd("E", "STORE 1 -FLAGS ($Junk)"))
	want("-$Junk")
	mustOK(t, r.cmd("F", "STORE 2 FLAGS ($NotJunk \\Seen)"))
	want("$NotJunk", fmt.Sprintf("%d/%d/ham", id, b3))

	// Out of Junk into INBOX: ham; out of Junk into Trash: nothing.
	r.cmd("G", "SELECT Junk")
	mustOK(t, r.cmd("H", "COPY 1 INBOX"))
	want("copy out of Junk", fmt.Sprintf("%d/%d/ham", id, b1))
	mustOK(t, r.cmd("I", "MOVE 1 Trash"))
	want("Junk to Trash")

	// Without a trainer nothing breaks.
	plain := newTestEnv(t, Config{})
	plain.deliver("INBOX", msg(4))
	r = plain.raw()
	r.login()
	r.cmd("J", "SELECT INBOX")
	mustOK(t, r.cmd("K", "MOVE 1:* Junk"))
	want("no trainer")
}

func mustOK(t *testing.T, lines []string) {
	t.Helper()
	if l := last(lines); !strings.Contains(l, " OK") {
		t.Fatalf("command failed: %q", lines)
	}
}

func TestJunkDecisionRules(t *testing.T) {
	inbox := store.Mailbox{ID: 1}
	junk := store.Mailbox{ID: 2, SpecialUse: store.SpecialJunk}
	trash := store.Mailbox{ID: 3, SpecialUse: store.SpecialTrash}
	for _, tc := range []struct {
		src, dst     store.Mailbox
		spam, signal bool
	}{
		{inbox, junk, true, true}, {junk, inbox, false, true}, {junk, trash, false, false},
		{inbox, trash, false, false}, {junk, junk, false, false}, {trash, junk, true, true},
	} {
		spam, ok := store.JunkMove(tc.src, tc.dst)
		if spam != tc.spam || ok != tc.signal {
			t.Errorf("move %d→%d: %v %v, want %v %v", tc.src.ID, tc.dst.ID, spam, ok, tc.spam, tc.signal)
		}
	}
	for _, tc := range []struct {
		op           store.FlagOp
		kws          []string
		spam, signal bool
	}{
		{store.FlagsAdd, []string{"$junk"}, true, true},
		{store.FlagsReplace, []string{"$NotJunk"}, false, true},
		{store.FlagsRemove, []string{"$Junk"}, false, false},
		{store.FlagsAdd, []string{"$Junk", "$NotJunk"}, false, false},
		{store.FlagsAdd, []string{"$Forwarded"}, false, false},
	} {
		spam, ok := junkKeywords(tc.op, tc.kws)
		if spam != tc.spam || ok != tc.signal {
			t.Errorf("store %v %v: %v %v", tc.op, tc.kws, spam, ok)
		}
	}
}
