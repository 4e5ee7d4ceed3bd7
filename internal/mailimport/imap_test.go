package mailimport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pimail/internal/certs"
	"pimail/internal/imapd"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

// srcAuth accepts the password "pw" for any account of the source store.
type srcAuth struct{ st store.Store }

func (a srcAuth) Authenticate(ctx context.Context, user, pass, _ string) (store.Account, error) {
	if pass != "pw" {
		return store.Account{}, errors.New("invalid credentials")
	}
	return a.st.Account(ctx, strings.ToLower(user))
}

// imapSource is a pimail IMAP server on loopback over a store holding
// alice@example.org's mail.
type imapSource struct {
	st   *sqlite.Store
	acct store.Account
	addr string
}

func newIMAPSource(t testing.TB) *imapSource {
	t.Helper()
	st := newStore(t)
	acct, err := st.Account(context.Background(), "alice@example.org")
	if err != nil {
		t.Fatal(err)
	}
	srv := imapd.New(imapd.Config{AllowInsecureAuth: true}, st, srcAuth{st}, discard)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &imapSource{st: st, acct: acct, addr: ln.Addr().String()}
}

func (s *imapSource) add(t *testing.T, mailbox, raw string, flags store.Flags, kws []string, date time.Time) {
	t.Helper()
	ctx := context.Background()
	mb, err := s.st.Mailbox(ctx, s.acct.ID, mailbox)
	if errors.Is(err, store.ErrNotFound) {
		mb, err = s.st.CreateMailbox(ctx, s.acct.ID, mailbox, "")
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.st.Append(ctx, mb.ID, []byte(raw), flags, kws, date); err != nil {
		t.Fatal(err)
	}
}

func (s *imapSource) source(statePath string) IMAPSource {
	return IMAPSource{Addr: s.addr, User: "alice@example.org", Password: "pw", Security: SecurityInsecure,
		StatePath: statePath, Batch: 3, DialTimeout: 5 * time.Second}
}

func msgText(i int) string {
	return fmt.Sprintf("From: bob@example.org\r\nSubject: message %d\r\n\r\nbody %d\r\n", i, i)
}

func importIMAP(t *testing.T, dst store.Store, src IMAPSource) Stats {
	t.Helper()
	im := newImporter(t, dst)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := im.ImportIMAP(ctx, src); err != nil {
		t.Fatalf("import: %v", err)
	}
	return im.Stats()
}

func TestIMAPImport(t *testing.T) {
	src := newIMAPSource(t)
	d1 := time.Date(2019, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 7 {
		src.add(t, "INBOX", msgText(i), store.Flags(i%4), nil, d1.Add(time.Duration(i)*time.Hour))
	}
	src.add(t, "Sent", msgText(100), store.FlagSeen, []string{"$Forwarded", "work"}, d1)
	src.add(t, "Lists/go ü", msgText(200), store.FlagFlagged|store.FlagDraft, nil, d1)

	dst := newStore(t)
	state := filepath.Join(t.TempDir(), "import", "state.journal")
	s := importIMAP(t, dst, src.source(state))
	if s.Messages != 9 || s.Errors != 0 || s.Skipped != 0 {
		t.Fatalf("first run: %+v", s)
	}
	acct := newImporter(t, dst).Account().ID
	inbox := readMailbox(t, dst, acct, "INBOX")
	if len(inbox) != 7 {
		t.Fatalf("INBOX has %d messages", len(inbox))
	}
	for i, m := range inbox {
		if m.raw != msgText(i) || m.flags != store.Flags(i%4) || !m.meta.InternalDate.Equal(d1.Add(time.Duration(i)*time.Hour)) {
			t.Errorf("INBOX %d: %q flags %b date %v", i, m.raw, m.flags, m.meta.InternalDate)
		}
	}
	sent := readMailbox(t, dst, acct, "Sent")
	if len(sent) != 1 || sent[0].flags != store.FlagSeen || strings.Join(sent[0].kws, ",") != "$Forwarded,work" {
		t.Errorf("Sent: %+v", sent)
	}
	if l := readMailbox(t, dst, acct, "Lists/go ü"); len(l) != 1 || l[0].flags != store.FlagFlagged|store.FlagDraft {
		t.Errorf("Lists/go ü: %+v", l)
	}

	// A second run copies nothing; new messages are picked up.
	if s := importIMAP(t, dst, src.source(state)); s.Messages != 0 {
		t.Fatalf("second run copied %d messages", s.Messages)
	}
	src.add(t, "INBOX", msgText(7), 0, nil, d1)
	src.add(t, "INBOX", msgText(8), 0, nil, d1)
	if s := importIMAP(t, dst, src.source(state)); s.Messages != 2 {
		t.Fatalf("third run copied %d messages, want 2", s.Messages)
	}
	if n := len(readMailbox(t, dst, acct, "INBOX")); n != 9 {
		t.Fatalf("INBOX has %d messages after the third run, want 9", n)
	}

	// A crash between storing a message and its journal line: the journal
	// is one message behind. The next run recognises the stored message.
	j, err := openJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := j.get("INBOX")
	st.LastUID--
	if err := j.set("INBOX", st); err != nil {
		t.Fatal(err)
	}
	j.Close()
	s = importIMAP(t, dst, src.source(state))
	if s.Messages != 0 || s.Skipped != 1 {
		t.Fatalf("run after a simulated crash: %+v, want 0 stored and 1 recognised", s)
	}
	if n := len(readMailbox(t, dst, acct, "INBOX")); n != 9 {
		t.Fatalf("INBOX has %d messages after the crash run, want 9", n)
	}
}

func TestIMAPImportUIDValidityChange(t *testing.T) {
	src := newIMAPSource(t)
	src.add(t, "Old", msgText(1), 0, nil, time.Time{})
	dst := newStore(t)
	state := filepath.Join(t.TempDir(), "state.journal")
	if s := importIMAP(t, dst, src.source(state)); s.Messages != 1 {
		t.Fatalf("first run: %+v", s)
	}
	// Deleting and creating the folder again gives it a new UIDVALIDITY.
	ctx := context.Background()
	if err := src.st.DeleteMailbox(ctx, src.acct.ID, "Old"); err != nil {
		t.Fatal(err)
	}
	src.add(t, "Old", msgText(2), 0, nil, time.Time{})
	s := importIMAP(t, dst, src.source(state))
	if s.Messages != 0 || s.Errors != 1 {
		t.Fatalf("run after UIDVALIDITY change: %+v, want the folder refused", s)
	}
	o := src.source(state)
	o.Reimport = true
	if s := importIMAP(t, dst, o); s.Messages != 1 {
		t.Fatalf("reimport: %+v", s)
	}
}

func TestIMAPImportBadLogin(t *testing.T) {
	src := newIMAPSource(t)
	o := src.source(filepath.Join(t.TempDir(), "s"))
	o.Password = "wrong"
	im := newImporter(t, newStore(t))
	err := im.ImportIMAP(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "login") {
		t.Fatalf("err = %v, want a login error", err)
	}
}

func TestJournalTornLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "j")
	if err := os.WriteFile(p, []byte(journalMagic+"\n5 10 \"INBOX\"\n5 12 \"INB"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(p)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if st, ok := j.get("INBOX"); !ok || st.LastUID != 10 || st.UIDValidity != 5 {
		t.Fatalf("state %+v %v", st, ok)
	}
	if err := os.WriteFile(p, []byte("something else\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openJournal(p); err == nil {
		t.Fatal("foreign file accepted as a journal")
	}
}

// TestIMAPImportTLS imports over implicit TLS and over STARTTLS, verifying
// the server's (self-signed) certificate against its own file.
func TestIMAPImportTLS(t *testing.T) {
	dir := t.TempDir()
	tlsCfg, err := certs.Load("", "", true, "localhost", dir)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(dir, "tls", "self-signed.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the PEM file")
	}
	st := newStore(t)
	acct, _ := st.Account(context.Background(), "alice@example.org")
	src := &imapSource{st: st, acct: acct}
	src.add(t, "INBOX", msgText(1), store.FlagSeen, nil, time.Time{})
	srv := imapd.New(imapd.Config{TLS: tlsCfg}, st, srcAuth{st}, discard)
	t.Cleanup(func() { srv.Close() })
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	implicit, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(plain)
	go srv.Serve(tls.NewListener(implicit, tlsCfg))

	for _, tc := range []struct {
		name string
		addr string
		sec  Security
	}{
		{"starttls", plain.Addr().String(), SecurityStartTLS},
		{"tls", implicit.Addr().String(), SecurityTLS},
	} {
		o := src.source(filepath.Join(t.TempDir(), "state"))
		o.Addr, o.Security = tc.addr, tc.sec
		o.TLSConfig = &tls.Config{ServerName: "localhost", RootCAs: roots, MinVersion: tls.VersionTLS12}
		if s := importIMAP(t, newStore(t), o); s.Messages != 1 {
			t.Errorf("%s: imported %+v", tc.name, s)
		}
		// Without the certificate's root the connection is refused.
		o.TLSConfig = &tls.Config{ServerName: "localhost", MinVersion: tls.VersionTLS12}
		im := newImporter(t, newStore(t))
		if err := im.ImportIMAP(context.Background(), o); err == nil {
			t.Errorf("%s: untrusted certificate accepted", tc.name)
		}
	}
	// Plain text login is refused by a server that offers TLS.
	o := src.source(filepath.Join(t.TempDir(), "state"))
	o.Addr = plain.Addr().String()
	if err := newImporter(t, newStore(t)).ImportIMAP(context.Background(), o); err == nil {
		t.Error("plain-text login succeeded on a TLS server")
	}
}

// TestIMAPImportParallelFolders: with several folders copied at once, each
// local mailbox gets its messages in the remote UID order, all of them
// once; a server that admits fewer connections than asked for (here 2 of
// 4) only makes the import use fewer.
func TestIMAPImportParallelFolders(t *testing.T) {
	src := newIMAPSource(t)
	d1 := time.Date(2020, 5, 1, 8, 0, 0, 0, time.UTC)
	folders := []string{"INBOX", "Archive", "Lists/a", "Lists/b", "Work"}
	for i := range 40 {
		src.add(t, folders[i%len(folders)], msgText(i), store.Flags(i%4), nil, d1.Add(time.Duration(i)*time.Minute))
	}
	// A second server on the same store that admits 2 connections.
	limited := imapd.New(imapd.Config{AllowInsecureAuth: true, MaxConnections: 2}, src.st, srcAuth{src.st}, discard)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go limited.Serve(ln)
	t.Cleanup(func() { limited.Close() })

	for _, c := range []struct {
		name, addr string
	}{{"4 connections", src.addr}, {"2 admitted of 4", ln.Addr().String()}} {
		t.Run(c.name, func(t *testing.T) {
			dst := newStore(t)
			o := src.source(filepath.Join(t.TempDir(), "state"))
			o.Addr, o.Connections, o.Batch = c.addr, 4, 2
			if s := importIMAP(t, dst, o); s.Messages != 40 || s.Errors != 0 || s.Mailboxes != len(folders) {
				t.Fatalf("import: %+v", s)
			}
			acct := newImporter(t, dst).Account().ID
			for k, f := range folders {
				got := readMailbox(t, dst, acct, f)
				if len(got) != 40/len(folders) {
					t.Fatalf("%s: %d messages", f, len(got))
				}
				for n, m := range got {
					if i := k + n*len(folders); m.raw != msgText(i) || m.flags != store.Flags(i%4) {
						t.Errorf("%s message %d: %q flags %b, want message %d", f, n, m.raw, m.flags, i)
					}
				}
			}
			if s := importIMAP(t, dst, o); s.Messages != 0 {
				t.Fatalf("re-run copied %d messages", s.Messages)
			}
		})
	}
}
