package mailimport

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

// writeMaildirFile creates dir/sub/name with body and mtime.
func writeMaildirFile(t *testing.T, dir, sub, name, body string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(dir, sub)
	for _, s := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, s), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(p, name)
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestMaildirFolderName(t *testing.T) {
	for in, want := range map[string]string{
		".Sub.Folder":       "Sub/Folder",
		".Sent":             "Sent",
		".INBOX.Lists.go":   "Lists/go",
		".Entw&APw-rfe":     "Entwürfe",
		".a&-b":             "a&b",
		"Lists.golang-nuts": "Lists/golang-nuts",
	} {
		got, err := MaildirFolderName(in)
		if err != nil || got != want {
			t.Errorf("MaildirFolderName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := MaildirFolderName(".a..b"); err == nil {
		t.Error("empty level accepted")
	}
}

func TestMaildirImport(t *testing.T) {
	root := t.TempDir()
	t1 := time.Date(2021, 5, 1, 10, 0, 0, 0, time.UTC)
	t2 := time.Date(2021, 5, 2, 10, 0, 0, 0, time.UTC)
	// Delivery order (name time) is the reverse of the listing order.
	writeMaildirFile(t, root, "cur", "1620000200.M1P1.host:2,FRS", "Subject: second\n\nb\n", t2)
	writeMaildirFile(t, root, "cur", "1620000100.M1P1.host:2,Sa", "Subject: first\n\na\n", t1)
	writeMaildirFile(t, root, "new", "1620000300.M1P1.host", "Subject: new\n\nc\n", t2)
	sub := filepath.Join(root, ".Lists.go&AOk-")
	writeMaildirFile(t, sub, "cur", "1620000400.M1P1.host:2,DPT", "Subject: draft\n\nd\n", t1)
	if err := os.WriteFile(filepath.Join(root, "dovecot-keywords"), []byte("0 $Junk\n1 work\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "subscriptions"), []byte("Lists.go&AOk-\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not a maildir folder: ignored.
	if err := os.MkdirAll(filepath.Join(root, ".notes"), 0o700); err != nil {
		t.Fatal(err)
	}

	st := newStore(t)
	im := newImporter(t, st)
	ctx := context.Background()
	if err := im.ImportMaildir(ctx, root); err != nil {
		t.Fatal(err)
	}
	if s := im.Stats(); s.Messages != 4 || s.Mailboxes != 2 || s.Errors != 0 {
		t.Fatalf("stats %+v", s)
	}
	inbox := readMailbox(t, st, im.Account().ID, "INBOX")
	if len(inbox) != 3 {
		t.Fatalf("INBOX has %d messages", len(inbox))
	}
	want := []struct {
		subj  string
		flags store.Flags
		kws   string
		date  time.Time
	}{
		{"first", store.FlagSeen, "$Junk", t1},
		{"second", store.FlagFlagged | store.FlagAnswered | store.FlagSeen, "", t2},
		{"new", 0, "", t2},
	}
	for i, w := range want {
		m := inbox[i]
		if !strings.Contains(m.raw, "Subject: "+w.subj) || m.flags != w.flags ||
			strings.Join(m.kws, ",") != w.kws || !m.meta.InternalDate.Equal(w.date) {
			t.Errorf("INBOX %d: %q flags %b kws %v date %v; want %s %b %q %v",
				i, m.raw, m.flags, m.kws, m.meta.InternalDate, w.subj, w.flags, w.kws, w.date)
		}
	}
	sm := readMailbox(t, st, im.Account().ID, "Lists/goé")
	if len(sm) != 1 || sm[0].flags != store.FlagDraft|store.FlagDeleted || strings.Join(sm[0].kws, ",") != "$Forwarded" {
		t.Fatalf("Lists/goé: %+v", sm)
	}
	mb, err := st.Mailbox(ctx, im.Account().ID, "Lists/goé")
	if err != nil || !mb.Subscribed {
		t.Errorf("Lists/goé subscribed = %v, %v", mb.Subscribed, err)
	}
}

func TestMaildirNotAMaildir(t *testing.T) {
	st := newStore(t)
	im := newImporter(t, st)
	if err := im.ImportMaildir(context.Background(), t.TempDir()); err == nil {
		t.Fatal("empty directory imported without error")
	}
}

func TestNaturalCompare(t *testing.T) {
	in := []string{"1.M10.h", "1.M2.h", "1.M1.h", "2.M0.h", "1.M02.h", "1.Ma.h"}
	slices.SortFunc(in, naturalCompare)
	want := "1.M1.h 1.M02.h 1.M2.h 1.M10.h 1.Ma.h 2.M0.h"
	if got := strings.Join(in, " "); got != want {
		t.Errorf("sorted %s, want %s", got, want)
	}
}
