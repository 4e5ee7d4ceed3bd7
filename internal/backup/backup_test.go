package backup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

func openStore(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	// Messages over 100 bytes get a file, the others are kept in the
	// database: a backup has both kinds (populate makes both).
	st, err := sqlite.Open(dir, sqlite.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), CollectInterval: -1, InlineMax: 100})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// populate makes a data directory with an account, n messages (the even
// ones with a file of their own, see openStore) and files in the
// auxiliary directories (and a temporary file that must be skipped).
func populate(t *testing.T, n int) (*sqlite.Store, store.Account) {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "data"))
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	a, err := st.AddAccount(ctx, "u@example.org", "hash")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		raw := fmt.Sprintf("From: a@example.net\r\nSubject: m%d\r\n\r\nbody %d\r\n", i, i)
		if i%2 == 0 {
			raw += strings.Repeat("padding to 200 bytes\r\n", 8)
		}
		if _, err := st.Deliver(ctx, store.Delivery{Raw: []byte(raw), Recipients: []store.Recipient{{AccountID: a.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	// What lives beside the mail in the database goes with it.
	if _, err := st.SetPreferences(ctx, a.ID, "webmail", []byte(`{"signature":"s"}`), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Secret(ctx, "srs", []byte("srs secret")); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMTASTSPolicy(ctx, "example.org", "version: STSv1\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveSpamModel(ctx, a.ID, []byte("model"), 0, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.CreateSession(ctx, store.Session{App: "webmail", ID: "k", AccountID: a.ID, CSRF: "c",
		Created: now, LastSeen: now, Expires: now.Add(time.Hour)}, 0); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"tls/cert.pem":           "cert",
		"tls/.cert-123.tmp":      "half written",
		"import/imap-ab.journal": "journal",
	}
	for name, body := range files {
		p := filepath.Join(st.Dir(), name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return st, a
}

func verify(t *testing.T, dir string) sqlite.VerifyReport {
	t.Helper()
	rep, err := sqlite.VerifyDir(context.Background(), dir)
	if err != nil {
		t.Fatalf("verify %s: %v", dir, err)
	}
	if rep.Damaged() || len(rep.Orphans) > 0 {
		t.Fatalf("verify %s: problems %v, orphans %v", dir, rep.Problems, rep.Orphans)
	}
	return rep
}

func TestBackupAndRestore(t *testing.T) {
	ctx := context.Background()
	st, a := populate(t, 25)
	out := filepath.Join(t.TempDir(), "backup")
	m, err := Run(ctx, st, out, Options{})
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if m.Blobs != 13 || m.AuxFiles != 2 || !m.Linked {
		t.Errorf("manifest %+v: want 13 linked message files (12 more messages in the database) and 2 auxiliary files", m)
	}
	if _, err := os.Stat(filepath.Join(out, "tls", ".cert-123.tmp")); err == nil {
		t.Errorf("a temporary file was backed up")
	}
	if got, err := ReadManifest(out); err != nil || got.Blobs != 13 {
		t.Fatalf("ReadManifest: %+v, %v", got, err)
	}
	verify(t, out)

	data := filepath.Join(t.TempDir(), "restored")
	rs, err := Restore(ctx, out, data)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if rs.Blobs != 13 || rs.AuxFiles != 2 {
		t.Errorf("restore stats %+v", rs)
	}
	if b, err := os.ReadFile(filepath.Join(data, "import", "imap-ab.journal")); err != nil || string(b) != "journal" {
		t.Errorf("import journal after restore: %q, %v", b, err)
	}
	rep := verify(t, data)
	if rep.MailRows != 25 {
		t.Errorf("restored %d mail rows, want 25", rep.MailRows)
	}
	rst := openStore(t, data)
	inbox, err := rst.Mailbox(ctx, a.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := rst.UIDs(ctx, inbox.ID)
	if err != nil || len(ms) != 25 {
		t.Fatalf("restored INBOX: %d messages, %v", len(ms), err)
	}
	for _, msg := range ms {
		if _, err := rst.ReadBlob(ctx, msg.BlobID); err != nil {
			t.Fatalf("restored message UID %d: %v", msg.UID, err)
		}
	}
	if doc, _, err := rst.Preferences(ctx, a.ID, "webmail"); err != nil || string(doc) != `{"signature":"s"}` {
		t.Errorf("preferences after restore: %q, %v", doc, err)
	}
	if sec, err := rst.Secret(ctx, "srs", []byte("other")); err != nil || string(sec) != "srs secret" {
		t.Errorf("SRS secret after restore: %q, %v", sec, err)
	}
	if p, err := rst.MTASTSPolicy(ctx, "example.org"); err != nil || p != "version: STSv1\r\n" {
		t.Errorf("MTA-STS policy after restore: %q, %v", p, err)
	}
	if m, _, err := rst.SpamModel(ctx, a.ID); err != nil || string(m) != "model" {
		t.Errorf("spam model after restore: %q, %v", m, err)
	}
	if s, err := rst.Session(ctx, "webmail", "k", time.Now()); err != nil || s.AccountID != a.ID {
		t.Errorf("session after restore: %+v, %v", s, err)
	}
}

// TestRestoreFormat1 restores a backup made before all state moved into
// the database: the files it holds beside the database are restored too,
// for the server's first start to move in (internal/upgrade).
func TestRestoreFormat1(t *testing.T) {
	ctx := context.Background()
	st, _ := populate(t, 3)
	out := filepath.Join(t.TempDir(), "backup")
	m, err := Run(ctx, st, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.Format = 1
	if err := writeManifest(out, m); err != nil {
		t.Fatal(err)
	}
	legacy := map[string]string{"spam/base.model": "model", "webmail/1.json": "{}", "srs.key": "secret", "mta-sts/example.org.txt": "policy"}
	for name, body := range legacy {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(t.TempDir(), "restored")
	rs, err := Restore(ctx, out, data)
	if err != nil {
		t.Fatal(err)
	}
	if rs.AuxFiles != 2+len(legacy) {
		t.Errorf("restored %d auxiliary files, want %d", rs.AuxFiles, 2+len(legacy))
	}
	for name, body := range legacy {
		if b, err := os.ReadFile(filepath.Join(data, name)); err != nil || string(b) != body {
			t.Errorf("%s after restore: %q, %v", name, b, err)
		}
	}
	// A backup of this format never restores such files.
	m.Format = ManifestFormat
	if err := writeManifest(out, m); err != nil {
		t.Fatal(err)
	}
	data2 := filepath.Join(t.TempDir(), "restored2")
	if _, err := Restore(ctx, out, data2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data2, "srs.key")); err == nil {
		t.Error("a format 2 backup restored a legacy file")
	}
}

func TestRestoreRefuses(t *testing.T) {
	ctx := context.Background()
	st, _ := populate(t, 3)
	out := filepath.Join(t.TempDir(), "backup")
	if _, err := Run(ctx, st, out, Options{Copy: true}); err != nil {
		t.Fatal(err)
	}
	// Into a non-empty directory.
	busy := t.TempDir()
	if err := os.WriteFile(filepath.Join(busy, "pimail.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctx, out, busy); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("restore into a non-empty directory: %v", err)
	}
	// From a directory that is not a complete backup.
	if _, err := Restore(ctx, st.Dir(), filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "not a complete pimail backup") {
		t.Errorf("restore from a data directory: %v", err)
	}
	// From a backup with a damaged message file: fails, leaves nothing.
	var victim string
	_ = filepath.WalkDir(filepath.Join(out, "blobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && victim == "" {
			victim = p
		}
		return nil
	})
	if err := os.WriteFile(victim, []byte("bit rot"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "t")
	if _, err := Restore(ctx, out, target); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("restore of a damaged backup: %v, want an error naming the damage", err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("a failed restore left %d entries in the target", len(ents))
	}
}
