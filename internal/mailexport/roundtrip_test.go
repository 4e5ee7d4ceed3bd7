package mailexport

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pimail/internal/mailimport"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
	"pimail/internal/testcorpus"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func newStore(t testing.TB) (*sqlite.Store, store.Account) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	acct, err := st.AddAccount(ctx, "alice@example.org", "x")
	if err != nil {
		t.Fatal(err)
	}
	return st, acct
}

// snapshot is what must survive a round trip, per mailbox in UID order.
type snapshot map[string][]msg

type msg struct {
	raw   string
	flags store.Flags
	kws   string
	date  int64
}

func takeSnapshot(t testing.TB, st store.Store, acct store.Account) snapshot {
	t.Helper()
	ctx := context.Background()
	mbs, err := st.Mailboxes(ctx, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := snapshot{}
	for _, mb := range mbs {
		metas, err := st.UIDs(ctx, mb.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metas {
			raw, err := st.ReadBlob(ctx, m.BlobID)
			if err != nil {
				t.Fatal(err)
			}
			out[mb.Name] = append(out[mb.Name], msg{string(raw), m.Flags, strings.Join(m.Keywords, " "), m.InternalDate.Unix()})
		}
	}
	return out
}

func compare(t *testing.T, want, got snapshot) {
	t.Helper()
	for name, wm := range want {
		gm := got[name]
		if len(gm) != len(wm) {
			t.Errorf("mailbox %q: %d messages, want %d", name, len(gm), len(wm))
			continue
		}
		for i := range wm {
			if gm[i] != wm[i] {
				t.Errorf("mailbox %q message %d:\n got %+v\nwant %+v", name, i+1, gm[i], wm[i])
				return
			}
		}
	}
	for name, gm := range got {
		if _, ok := want[name]; !ok && len(gm) > 0 {
			t.Errorf("unexpected mailbox %q with %d messages", name, len(gm))
		}
	}
}

// seed fills an account with awkward messages: every flag combination,
// keywords, From-quoting at several depths, CRLF, no final line break,
// 8-bit bytes, a header-only message, a hierarchical and a non-ASCII
// mailbox name.
func seed(t *testing.T, st store.Store, acct store.Account) {
	t.Helper()
	ctx := context.Background()
	mk := func(name string) store.Mailbox {
		mb, err := st.Mailbox(ctx, acct.ID, name)
		if err != nil {
			mb, err = st.CreateMailbox(ctx, acct.ID, name, "")
		}
		if err != nil {
			t.Fatal(err)
		}
		return mb
	}
	inbox, lists, uni := mk("INBOX"), mk("Lists/golang"), mk("Entwürfe")
	base := time.Date(2022, 7, 1, 9, 30, 15, 0, time.UTC)
	bodies := []string{
		"From: \"Bob B\" <bob@example.org>\nSubject: quoting\n\nFrom the start\n>From once\n>>From twice\nFrom\n",
		"From: carol@example.org\r\nSubject: crlf\r\n\r\nline\r\nFrom crlf\r\n",
		"Subject: no final newline\n\nend",
		"Subject: header only\n",
		"Subject: 8bit \xe9\xe8\n\n\xff\xfe binary-ish\n\n\n",
		"Subject: trailing blank lines\n\nx\n\n",
	}
	for i, b := range bodies {
		flags := store.Flags(i*5) & (store.FlagSeen | store.FlagAnswered | store.FlagFlagged | store.FlagDeleted | store.FlagDraft)
		var kws []string
		if i%2 == 0 {
			kws = []string{"$Forwarded", "$Junk", "project-x"}
		}
		if _, err := st.Append(ctx, inbox.ID, []byte(b), flags, kws, base.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	for f := store.Flags(0); f < 32; f++ {
		raw := "From: list@example.org\nSubject: flags " + string(rune('A'+f)) + "\n\nbody\n"
		if _, err := st.Append(ctx, lists.ID, []byte(raw), f, nil, base); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Append(ctx, uni.ID, []byte("Subject: ü\n\nü\n"), store.FlagSeen, []string{"work"}, base); err != nil {
		t.Fatal(err)
	}
}

// normalise applies what the formats cannot represent: a missing final
// line break is added.
func normalise(s snapshot) snapshot {
	out := snapshot{}
	for k, v := range s {
		for _, m := range v {
			if !strings.HasSuffix(m.raw, "\n") {
				m.raw += "\n"
			}
			out[k] = append(out[k], m)
		}
	}
	return out
}

func TestMboxRoundTrip(t *testing.T) {
	ctx := context.Background()
	src, acct := newStore(t)
	seed(t, src, acct)
	want := normalise(takeSnapshot(t, src, acct))

	ex, err := New(ctx, src, acct.Address, discard)
	if err != nil {
		t.Fatal(err)
	}
	mbs, err := ex.Mailboxes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := ex.ExportMboxDir(ctx, out, mbs); err != nil {
		t.Fatal(err)
	}
	if s := ex.Stats(); s.Messages != 39 {
		t.Fatalf("exported %+v, want 39 messages", s)
	}
	dst, dacct := newStore(t)
	im, err := mailimport.New(ctx, dst, dacct.Address, discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, mb := range mbs {
		p := filepath.Join(out, filepath.FromSlash(mb.Name)+".mbox")
		if err := im.ImportMboxFile(ctx, p, mb.Name, mailimport.MboxRD); err != nil {
			t.Fatal(err)
		}
	}
	compare(t, want, takeSnapshot(t, dst, dacct))

	// The exported file reads back with the From-quoting of mboxrd.
	data, err := os.ReadFile(filepath.Join(out, "INBOX.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"\n>From the start\n", "\n>>From once\n", "\n>>>From twice\n", "\nFrom bob@example.org Fri Jul  1 09:30:15 2022\n", "\nStatus: O\n"} {
		if !bytes.Contains(append([]byte("\n"), data...), []byte(w)) {
			t.Errorf("mbox lacks %q", w)
		}
	}
}

func TestMaildirRoundTrip(t *testing.T) {
	ctx := context.Background()
	src, acct := newStore(t)
	seed(t, src, acct)
	// Subscribed state survives too.
	if err := src.SetSubscribed(ctx, acct.ID, "Lists/golang", true); err != nil {
		t.Fatal(err)
	}
	want := takeSnapshot(t, src, acct)

	ex, err := New(ctx, src, acct.Address, discard)
	if err != nil {
		t.Fatal(err)
	}
	mbs, err := ex.Mailboxes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "Maildir")
	if err := ex.ExportMaildir(ctx, root, mbs); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".Lists.golang/maildirfolder", ".Entw&APw-rfe/cur", "cur", "subscriptions", "dovecot-keywords"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	names, _ := filepath.Glob(filepath.Join(root, "cur", "*"))
	if len(names) != 6 || !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ":2,Pab") }) {
		t.Errorf("INBOX files: %v", names)
	}
	// Exporting into a non-empty directory is refused.
	if err := ex.ExportMaildir(ctx, root, mbs); err == nil {
		t.Error("export into a non-empty directory accepted")
	}

	dst, dacct := newStore(t)
	im, err := mailimport.New(ctx, dst, dacct.Address, discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.ImportMaildir(ctx, root); err != nil {
		t.Fatal(err)
	}
	compare(t, want, takeSnapshot(t, dst, dacct))
	mb, err := dst.Mailbox(ctx, dacct.ID, "Lists/golang")
	if err != nil || !mb.Subscribed {
		t.Errorf("Lists/golang subscribed = %v, %v", mb.Subscribed, err)
	}
}

// TestMboxCorpusRoundTrip: the test corpus' 1k mailbox, imported, exported and
// imported again, is identical, and the exported file equals the original
// except for the added Status lines.
func TestMboxCorpusRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("corpus test skipped in -short mode")
	}
	corpus, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(corpus, "mailbox", "mailbox-1k.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src, acct := newStore(t)
	im, err := mailimport.New(ctx, src, acct.Address, discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.ImportMbox(ctx, bytes.NewReader(orig), "Archive/linux-mips", mailimport.MboxRD); err != nil {
		t.Fatal(err)
	}
	ex, err := New(ctx, src, acct.Address, discard)
	if err != nil {
		t.Fatal(err)
	}
	mbs, err := ex.Mailboxes(ctx, "Archive/linux-mips")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ex.ExportMbox(ctx, &buf, mbs[0]); err != nil {
		t.Fatal(err)
	}
	exported := normFromLines(bytes.ReplaceAll(buf.Bytes(), []byte("\nStatus: O\n"), []byte("\n")))
	orig = normFromLines(orig)
	if !bytes.Equal(exported, orig) {
		i := 0
		for i < len(orig) && i < len(exported) && orig[i] == exported[i] {
			i++
		}
		t.Fatalf("export differs from the original at byte %d: %q vs %q", i, exported[i:min(i+80, len(exported))], orig[i:min(i+80, len(orig))])
	}
	dst, dacct := newStore(t)
	im2, err := mailimport.New(ctx, dst, dacct.Address, discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := im2.ImportMbox(ctx, &buf, "Archive/linux-mips", mailimport.MboxRD); err != nil {
		t.Fatal(err)
	}
	compare(t, takeSnapshot(t, src, acct), takeSnapshot(t, dst, dacct))
}

// normFromLines rewrites From_ lines with single spaces and no leading
// zero in the day: the corpus writes "Feb 01", asctime "Feb  1".
func normFromLines(b []byte) []byte {
	lines := strings.SplitAfter(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "From ") {
			f := strings.Fields(l)
			if len(f) >= 5 {
				f[4] = strings.TrimLeft(f[4], "0")
			}
			lines[i] = strings.Join(f, " ") + "\n"
		}
	}
	return []byte(strings.Join(lines, ""))
}
