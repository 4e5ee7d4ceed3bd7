package postgres

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

// TestCopyFromSQLite fills an SQLite store with every kind of state,
// copies a snapshot of it into PostgreSQL and checks, through the store
// interfaces of both, that a client sees the same mailboxes, UIDs,
// MODSEQs, flags, envelopes, bytes, changes and search results; that
// VerifyCopy finds no difference, and finds one made on purpose.
func TestCopyFromSQLite(t *testing.T) {
	c := context.Background()
	src, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quietLogger(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.AddDomain(c, "example.org"); err != nil {
		t.Fatal(err)
	}
	var accts []store.Account
	for _, a := range []string{"a@example.org", "b@example.org"} {
		acc, err := src.AddAccount(c, a, "hash-"+a)
		if err != nil {
			t.Fatal(err)
		}
		accts = append(accts, acc)
	}
	a, b := accts[0], accts[1]
	for i := range 30 {
		rs := []store.Recipient{{AccountID: a.ID, Keywords: []string{"$Label"}}}
		if i%3 == 0 {
			rs = append(rs, store.Recipient{AccountID: b.ID, Mailbox: "Lists/go"})
		}
		if _, err := src.Deliver(c, store.Delivery{Raw: testMessage(i), Recipients: rs, InternalDate: time.Unix(1700000000+int64(i)*3600, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	inbox, _ := src.Mailbox(c, a.ID, "INBOX")
	arch, _ := src.Mailbox(c, a.ID, "Archive")
	if _, err := src.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 9}}, store.FlagsAdd, store.FlagSeen|store.FlagDeleted, []string{"Work"}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Expunge(c, inbox.ID, store.UIDSet{{Start: 3, Stop: 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Move(c, inbox.ID, store.UIDSet{{Start: 10, Stop: 12}}, arch.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Enqueue(c, store.QueueEntry{MailFrom: "a@example.org", AccountID: a.ID,
		Recipients: []store.QueueRecipient{{Address: "x@remote.example"}, {Address: "y@remote.example"}}}, testMessage(99)); err != nil {
		t.Fatal(err)
	}
	if err := src.SetSCRAM(c, a.Address, store.SCRAMCredentials{Salt: []byte("s"), Iterations: 4096, StoredKey: []byte("k"), ServerKey: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if err := src.PutSieveScript(c, a.ID, "rules", "keep;"); err != nil {
		t.Fatal(err)
	}
	if err := src.SetActiveSieveScript(c, a.ID, "rules"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.SetPreferences(c, a.ID, "webmail", []byte(`{"x":1}`), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Secret(c, "srs", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if err := src.LogDelivery(c, []store.DeliveryLogEntry{{Direction: store.DirectionIn, From: "x@y.z", To: a.Address, Result: store.ResultAccepted}}); err != nil {
		t.Fatal(err)
	}
	card, err := src.PutContact(c, a.ID, store.Contact{Href: "x.vcf", UID: "x", Card: []byte("BEGIN:VCARD\r\nEND:VCARD\r\n"),
		Name: "X", Emails: []string{"x@remote.example"}, Groups: []string{"friends"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ident, err := src.PutIdentity(c, a.ID, store.Identity{Address: "A@example.org", Name: "A", Signature: "-- \nA"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(time.Now().UnixMilli())
	if err := src.CreateSession(c, store.Session{App: "webmail", ID: "s1", AccountID: a.ID, CSRF: "t", Created: now,
		LastSeen: now, Expires: now.Add(time.Hour), Client: "Firefox on Linux"}, 0); err != nil {
		t.Fatal(err)
	}
	logins := []store.LoginEvent{{Node: "n1", Account: a.Address, Source: "192.0.2.7", Time: now},
		{Node: "n1", Account: a.Address, Source: "192.0.2.8", Time: now, Success: true}}
	if err := src.RecordLogins(c, logins); err != nil {
		t.Fatal(err)
	}
	// The newest mailbox, deleted before the copy: its ID (a MAILBOXID a
	// client may have seen, RFC 8474) stays taken in PostgreSQL.
	gone, err := src.CreateMailbox(c, a.ID, "Gone", store.SpecialNone)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.DeleteMailbox(c, a.ID, "Gone"); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap")
	if _, err := src.Snapshot(c, snap, sqlite.SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}

	url := newDatabase(t)
	if err := CopyFromSQLite(c, url, snap, nil); err != nil {
		t.Fatalf("CopyFromSQLite: %v", err)
	}
	if problems, err := VerifyCopy(c, url, snap); err != nil || len(problems) > 0 {
		t.Fatalf("VerifyCopy: %v %q", err, problems)
	}
	if err := CopyFromSQLite(c, url, snap, nil); err == nil {
		t.Fatal("a second copy into the same store was not refused")
	}
	dst, err := Open(url, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	for _, acc := range accts {
		smbs, _ := src.Mailboxes(c, acc.ID)
		dmbs, err := dst.Mailboxes(c, acc.ID)
		if err != nil || !reflect.DeepEqual(smbs, dmbs) {
			t.Fatalf("mailboxes of %s: SQLite %+v, PostgreSQL %+v (%v)", acc.Address, smbs, dmbs, err)
		}
		for _, mb := range smbs {
			sm, _ := src.Fetch(c, mb.ID, nil, store.FetchOptions{Parsed: true})
			dm, err := dst.Fetch(c, mb.ID, nil, store.FetchOptions{Parsed: true})
			if err != nil || len(sm) != len(dm) {
				t.Fatalf("%s: %d messages, PostgreSQL %d (%v)", mb.Name, len(sm), len(dm), err)
			}
			for i := range sm {
				x, y := sm[i], dm[i]
				if x.UID != y.UID || x.ModSeq != y.ModSeq || x.Flags != y.Flags || !reflect.DeepEqual(x.Keywords, y.Keywords) ||
					!x.InternalDate.Equal(y.InternalDate) || x.Size != y.Size || x.BlobID != y.BlobID ||
					!reflect.DeepEqual(x.Parsed.Envelope, y.Parsed.Envelope) || x.Parsed.Subject != y.Parsed.Subject {
					t.Fatalf("%s UID %d: SQLite %+v, PostgreSQL %+v", mb.Name, x.UID, x, y)
				}
				sr, _ := src.ReadBlob(c, x.BlobID)
				dr, err := dst.ReadBlob(c, y.BlobID)
				if err != nil || !bytes.Equal(sr, dr) {
					t.Fatalf("%s UID %d: bytes differ (%v)", mb.Name, x.UID, err)
				}
			}
			sch, _ := src.Changes(c, mb.ID, 0)
			dch, _ := dst.Changes(c, mb.ID, 0)
			if sch.HighestModSeq != dch.HighestModSeq || sch.UIDNext != dch.UIDNext || !reflect.DeepEqual(sch.Expunged, dch.Expunged) || len(sch.Updated) != len(dch.Updated) {
				t.Fatalf("%s: Changes(0) SQLite %+v, PostgreSQL %+v", mb.Name, sch, dch)
			}
			q := store.SearchQuery{Op: store.SearchText, Text: "body"}
			ss, _ := src.Search(c, mb.ID, q)
			ds, err := dst.Search(c, mb.ID, q)
			if err != nil || !reflect.DeepEqual(ss, ds) {
				t.Fatalf("%s: SEARCH TEXT: SQLite %v, PostgreSQL %v (%v)", mb.Name, ss, ds, err)
			}
		}
	}
	if cr, err := dst.SCRAM(c, a.Address); err != nil || cr.Iterations != 4096 {
		t.Fatalf("SCRAM after the copy: %+v, %v", cr, err)
	}
	if sc, err := dst.ActiveSieveScript(c, a.ID); err != nil || sc.Content != "keep;" {
		t.Fatalf("Sieve after the copy: %+v, %v", sc, err)
	}
	if q, err := dst.QueueEntries(c); err != nil || len(q) != 1 || len(q[0].Recipients) != 2 {
		t.Fatalf("queue after the copy: %+v, %v", q, err)
	}
	if l, u, _ := dst.Quota(c, a.ID); l != 0 || u != sumSizes(t, dst, a.ID) {
		t.Fatalf("usage after the copy %d, the mailboxes hold %d", u, sumSizes(t, dst, a.ID))
	}
	if got, err := dst.Contact(c, a.ID, "x.vcf"); err != nil || !reflect.DeepEqual(got, card) {
		t.Fatalf("contact after the copy: %+v, %v; want %+v", got, err, card)
	}
	if _, err := dst.PutContact(c, a.ID, store.Contact{Href: "y.vcf", UID: "y"}, 0); err != nil {
		t.Fatalf("a new contact after the copy: %v", err)
	}
	if _, err := dst.PutContact(c, a.ID, card, card.Version); err != nil {
		t.Fatalf("a contact's update after the copy: %v", err)
	}
	if ids, err := dst.Identities(c, a.ID); err != nil || len(ids) != 1 || ids[0] != ident {
		t.Fatalf("identities after the copy: %+v, %v; want %+v", ids, err, ident)
	}
	if l, err := dst.AccountSessions(c, "webmail", a.ID, now); err != nil || len(l) != 1 || l[0].Client != "Firefox on Linux" {
		t.Fatalf("sessions after the copy: %+v, %v", l, err)
	}
	sl, _ := src.LoginsAfter(c, 0, 10)
	if dl, err := dst.LoginsAfter(c, 0, 10); err != nil || !reflect.DeepEqual(sl, dl) || len(dl) != 2 {
		t.Fatalf("login events after the copy: %+v, %v; want %+v", dl, err, sl)
	}
	if err := dst.RecordLogins(c, logins[:1]); err != nil {
		t.Fatalf("a login event after the copy: %v", err)
	}
	if dl, err := dst.LoginsAfter(c, sl[1].Seq, 10); err != nil || len(dl) != 1 {
		t.Fatalf("a login event after the copy: %+v, %v; want one after seq %d", dl, err, sl[1].Seq)
	}
	if mb, err := dst.CreateMailbox(c, a.ID, "New", store.SpecialNone); err != nil || mb.ID <= gone.ID {
		t.Fatalf("mailbox created after the copy: %+v, %v; the one deleted before it had ID %d", mb, err, gone.ID)
	}
	// New mail goes on with the next UID, and new rows get new IDs.
	d, err := dst.Deliver(c, store.Delivery{Raw: testMessage(1000), Recipients: []store.Recipient{{AccountID: a.ID}}})
	if err != nil || d[0].UID != inbox.UIDNext {
		t.Fatalf("delivery after the copy: %+v, %v; want UID %d", d, err, inbox.UIDNext)
	}
	if _, err := dst.AddAccount(c, "c@example.org", "h"); err != nil {
		t.Fatalf("AddAccount after the copy: %v", err)
	}
	if id, err := dst.PutIdentity(c, a.ID, store.Identity{Address: "a2@example.org"}); err != nil || id.ID <= ident.ID {
		t.Fatalf("PutIdentity after the copy: %+v, %v", id, err)
	}
	// A difference is found.
	if _, err := dst.pool.Exec(c, "UPDATE mail SET flags = flags # 1 WHERE mailbox_id = $1 AND uid = 1", inbox.ID); err != nil {
		t.Fatal(err)
	}
	problems, err := VerifyCopy(c, url, snap)
	found := false
	for _, p := range problems {
		found = found || strings.HasPrefix(p, fmt.Sprintf("messages: SQLite %d|1|", inbox.ID))
	}
	if err != nil || !found {
		t.Fatalf("VerifyCopy after a flag changed: %v %q; want the message named", err, problems)
	}
}
