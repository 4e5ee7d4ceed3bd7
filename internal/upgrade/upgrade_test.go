package upgrade

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pimail/internal/delivery"
	"pimail/internal/dnscheck"
	"pimail/internal/spam"
	"pimail/internal/store/sqlite"
	"pimail/internal/webmail"
)

// extractFixture unpacks testdata/datadir-v10.tar.gz into dir: a data
// directory as pimail left it before state moved into the store (schema
// version 10; see testdata/README.md).
func extractFixture(t testing.TB, dir string) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "datadir-v10.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o700)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestUpgradeV10 opens a data directory written by the old layout, as
// every pimail command does (sqlite.Open migrates the schema, Run moves
// the files in), and finds all of the old state in the store.
func TestUpgradeV10(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	extractFixture(t, dir)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	srsKey, alicePrefs, bobPrefs := read("srs.key"), read("webmail/1.json"), read("webmail/2.json")

	st, err := sqlite.Open(dir, sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := Run(ctx, st, dir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	// Two preferences, two models, the SRS secret, one policy.
	if n != 6 {
		t.Errorf("%d items imported, want 6", n)
	}
	alice, err := st.Account(ctx, "alice@example.org")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := st.Account(ctx, "bob@example.org")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   int64
		want []byte
	}{{alice.ID, alicePrefs}, {bob.ID, bobPrefs}} {
		if doc, _, err := st.Preferences(ctx, c.id, webmail.PrefsApp); err != nil || !bytes.Equal(doc, c.want) {
			t.Errorf("preferences of account %d: %q, %v; want %q", c.id, doc, err, c.want)
		}
	}
	if got, err := delivery.LoadSRSSecret(ctx, st); err != nil || !bytes.Equal(got, srsKey) {
		t.Errorf("SRS secret %x, %v; want the old file's %x", got, err, srsKey)
	}
	if p, err := st.MTASTSPolicy(ctx, "example.org"); err != nil || p != dnscheck.MTASTSPolicy("mail.example.org") {
		t.Errorf("MTA-STS policy %q, %v", p, err)
	}
	// The models, as the spam filter reads them: the base trained on 25
	// spam and 25 ham, alice's on her two junk decisions.
	f, err := spam.New(spam.Config{Store: st, Logger: quiet(), ReloadInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id         int64
		spam, hams int
	}{{spam.BaseAccount, 25, 25}, {alice.ID, 1, 1}} {
		m, err := f.Model(c.id)
		if err != nil {
			t.Fatal(err)
		}
		if s, h := m.Counts(); s != c.spam || h != c.hams || m.Size() == 0 {
			t.Errorf("model of %d: %d spam, %d ham, %d tokens; want %d and %d", c.id, s, h, m.Size(), c.spam, c.hams)
		}
	}
	// Alice's ledger: her first message as spam, the second as ham; a
	// learner repeating those decisions trains nothing.
	inbox, err := st.Mailbox(ctx, alice.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := st.UIDs(ctx, inbox.ID)
	if err != nil || len(ms) != 2 {
		t.Fatalf("alice's INBOX: %d messages, %v", len(ms), err)
	}
	for i, m := range ms {
		if spam, ok, err := st.JunkTrained(ctx, alice.ID, m.BlobID); err != nil || !ok || spam != (i == 0) {
			t.Errorf("ledger of message %d: spam=%v ok=%v %v", i+1, spam, ok, err)
		}
	}
	// The files moved beside the database snapshot of the migration.
	for _, name := range Legacy {
		if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still in the data directory: %v", name, err)
		}
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "backup", "files-*", "spam", "account-1.trained"))
	snaps, _ := filepath.Glob(filepath.Join(dir, "backup", "pimail-v10-*.db"))
	if len(kept) != 1 || len(snaps) != 1 {
		t.Errorf("kept old files %v, database snapshots %v; want one each", kept, snaps)
	}
	// A second run (every command runs it) finds nothing to do.
	if n, err := Run(ctx, st, dir, quiet()); n != 0 || err != nil {
		t.Errorf("second run: %d items, %v", n, err)
	}
	if dirs, _ := filepath.Glob(filepath.Join(dir, "backup", "files-*")); len(dirs) != 1 {
		t.Errorf("backup directories of old files: %v", dirs)
	}
}

// TestRunKeepsTheStore: what the store has already (written after an
// import whose files a crash kept from moving, or made by this version
// before) stays; files that cannot be used are moved, not imported, and
// do not stop the server.
func TestRunKeepsTheStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(dir, sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	a, err := st.AddAccount(ctx, "a@example.org", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetPreferences(ctx, a.ID, webmail.PrefsApp, []byte(`{"signature":"new"}`), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Secret(ctx, delivery.SRSSecretName, []byte("the store's")); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"webmail/1.json":           `{"signature":"old"}`,
		"webmail/99.json":          `{"signature":"no such account"}`,
		"webmail/.prefs-123":       "half written",
		"webmail/7.json":           "not json",
		"spam/base.model":          "damaged",
		"spam/.model-1.tmp":        "half written",
		"srs.key":                  "the file's",
		"mta-sts/example.org.txt":  "version: STSv1\r\n",
		"mta-sts/unknown.test.txt": "version: STSv1\r\n",
		"mta-sts/bad..name.txt":    "version: STSv1\r\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Run(ctx, st, dir, quiet())
	if err != nil || n != 1 {
		t.Fatalf("Run: %d items, %v; want the one MTA-STS policy", n, err)
	}
	if doc, _, _ := st.Preferences(ctx, a.ID, webmail.PrefsApp); string(doc) != `{"signature":"new"}` {
		t.Errorf("the store's preferences were replaced: %q", doc)
	}
	if s, _ := st.Secret(ctx, delivery.SRSSecretName, []byte("x")); string(s) != "the store's" {
		t.Errorf("the store's SRS secret was replaced: %q", s)
	}
	if v, _ := st.SpamModelVersion(ctx, spam.BaseAccount); v != 0 {
		t.Error("a damaged model was imported")
	}
	if p, err := st.MTASTSPolicy(ctx, "example.org"); err != nil || p != "version: STSv1\r\n" {
		t.Errorf("MTA-STS policy %q, %v", p, err)
	}
	for name := range files {
		if strings.Contains(name, "/") {
			name = filepath.Dir(name)
		}
		if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still in the data directory", name)
		}
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "backup", "files-*", "webmail", "99.json"))
	if len(kept) != 1 {
		t.Errorf("the unused preferences were not kept: %v", kept)
	}
}
