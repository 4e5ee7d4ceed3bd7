// Package storetest is the behavioural test suite of store.Store, written
// only against the interface so that every implementation (store/sqlite,
// later store/postgres) runs the same checks, which call every method of
// every role interface:
//
//	func TestSuite(t *testing.T) {
//		storetest.Run(t, openEmptyStore, reopenSameData)
//	}
//
// open must return a new, empty store for each call. reopen, optional, must
// open the same data again after the suite closed the store it got from open
// (it receives that closed store, e.g. to learn its data directory); when nil
// the persistence test is skipped. The suite closes every store it gets;
// Close must tolerate being called twice (the harness may also close in a
// t.Cleanup).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/testcorpus"
)

// OpenFunc returns a new, empty store.
type OpenFunc func(t *testing.T) store.Store

// ReopenFunc opens the data of a store that has been closed.
type ReopenFunc func(t *testing.T, closed store.Store) store.Store

// Run runs the whole suite, each test on a fresh store.
func Run(t *testing.T, open OpenFunc, reopen ReopenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Domains", testDomains},
		{"Accounts", testAccounts},
		{"Aliases", testAliases},
		{"DirectoryVersion", testDirectoryVersion},
		{"DefaultMailboxes", testDefaultMailboxes},
		{"DeliverAndFetch", testDeliverAndFetch},
		{"DeliverManyRecipientsOneBlob", testDeliverManyRecipients},
		{"DeliverCreatesMailbox", testDeliverCreatesMailbox},
		{"DeliverUnknownAccount", testDeliverUnknownAccount},
		{"DeliverKeepsNoRaw", testDeliverKeepsNoRaw},
		{"Append", testAppend},
		{"FetchManyRanges", testFetchManyRanges},
		{"UIDAndModSeqMonotonic", testMonotonic},
		{"StoreFlags", testStoreFlags},
		{"Keywords", testKeywords},
		{"Copy", testCopy},
		{"Move", testMove},
		{"Expunge", testExpunge},
		{"ChangesSince", testChanges},
		{"ChangesEverySince", testChangesEverySince},
		{"CreateMailbox", testCreateMailbox},
		{"RenameMailbox", testRenameMailbox},
		{"RenameInbox", testRenameInbox},
		{"DeleteMailbox", testDeleteMailbox},
		{"Subscriptions", testSubscriptions},
		{"Recent", testRecent},
		{"MailboxStatus", testMailboxStatus},
		{"RemoveAccount", testRemoveAccount},
		{"BlobReleasedAfterExpunge", testBlobReleased},
		{"ConcurrentDeliveries", testConcurrentDeliveries},
		{"ChangeFeed", testChangeFeed},
		{"ChangeFeedSlowListener", testChangeFeedSlowListener},
		{"Corpus", testCorpus},
		{"SCRAM", testSCRAM},
		{"DKIMKeys", testDKIMKeys},
		{"Queue", testQueue},
		{"QueueIDsNotReused", testQueueIDsNotReused},
		{"ObjectIDs", testObjectIDs},
		{"RemoveAccountLeavesAliases", testRemoveAccountLeavesAliases},
		{"HeaderReads", testHeaderReads},
		{"MailboxPage", testMailboxPage},
		{"MailboxPageAttachment", testMailboxPageAttachment},
		{"AppendBatch", testAppendBatch},
		{"Preferences", testPreferences},
		{"Sessions", testSessions},
		{"SpamModels", testSpamModels},
		{"Secrets", testSecrets},
		{"MTASTSPolicies", testMTASTSPolicies},
		{"Contacts", testContacts},
		{"Identities", testIdentities},
		{"ListSorter", testListSorter},
		{"AccountSessions", testAccountSessions},
		{"LoginEvents", testLoginEvents},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
	t.Run("ReopenPersists", func(t *testing.T) {
		if reopen == nil {
			t.Skip("no reopen hook")
		}
		testReopen(t, open, reopen)
	})
	t.Run("QueueReopenPersists", func(t *testing.T) {
		if reopen == nil {
			t.Skip("no reopen hook")
		}
		testQueueReopen(t, open, reopen)
	})
}

// ctx returns a context bounded so that a hung store fails the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// fixture is a store with a domain and accounts.
type fixture struct {
	s        store.Store
	accounts []store.Account
}

func setup(t *testing.T, s store.Store, n int) fixture {
	t.Helper()
	c := ctx(t)
	if _, err := s.AddDomain(c, "example.org"); err != nil {
		t.Fatalf("AddDomain: %v", err)
	}
	f := fixture{s: s}
	for i := range n {
		a, err := s.AddAccount(c, fmt.Sprintf("user%d@example.org", i), "hash")
		if err != nil {
			t.Fatalf("AddAccount: %v", err)
		}
		f.accounts = append(f.accounts, a)
	}
	return f
}

func (f fixture) mailbox(t *testing.T, i int, name string) store.Mailbox {
	t.Helper()
	m, err := f.s.Mailbox(ctx(t), f.accounts[i].ID, name)
	if err != nil {
		t.Fatalf("Mailbox(%q): %v", name, err)
	}
	return m
}

// msg builds a small but complete MIME message; n makes it unique.
func msg(n int) []byte {
	return []byte(fmt.Sprintf("From: Alice Example <alice@example.net>\r\n"+
		"To: Bob <bob@example.org>, carol@example.org\r\n"+
		"Cc: dave@example.org\r\n"+
		"Subject: Test message %d\r\n"+
		"Date: Tue, 02 Jan 2024 15:04:05 +0100\r\n"+
		"Message-ID: <msg%d@example.net>\r\n"+
		"References: <root@example.net> <parent%d@example.net>\r\n"+
		"In-Reply-To: <parent%d@example.net>\r\n"+
		"MIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=\"b1\"\r\n"+
		"\r\n"+
		"--b1\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n"+
		"\r\n"+
		"Hello number %d.\r\n"+
		"--b1\r\n"+
		"Content-Type: application/octet-stream\r\n"+
		"Content-Disposition: attachment; filename=\"a.bin\"\r\n"+
		"Content-Transfer-Encoding: base64\r\n"+
		"\r\n"+
		"AAECAwQF\r\n"+
		"--b1--\r\n", n, n, n, n, n))
}

// deliver stores msg(n) in INBOX of the accounts given.
func (f fixture) deliver(t *testing.T, n int, accounts ...int) []store.Delivered {
	t.Helper()
	d := store.Delivery{Raw: msg(n)}
	for _, i := range accounts {
		d.Recipients = append(d.Recipients, store.Recipient{AccountID: f.accounts[i].ID})
	}
	out, err := f.s.Deliver(ctx(t), d)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if len(out) != len(accounts) {
		t.Fatalf("Deliver returned %d results for %d recipients", len(out), len(accounts))
	}
	return out
}

// appendN appends n messages (numbered from base) to a mailbox.
func (f fixture) appendN(t *testing.T, mb store.Mailbox, base, n int) []uint32 {
	t.Helper()
	var uids []uint32
	for i := range n {
		d, err := f.s.Append(ctx(t), mb.ID, msg(base+i), 0, nil, time.Time{})
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		uids = append(uids, d.UID)
	}
	return uids
}

func uidsOf(ms []store.MessageMeta) []uint32 {
	var out []uint32
	for _, m := range ms {
		out = append(out, m.UID)
	}
	return out
}

func fetchAll(t *testing.T, s store.Store, mailboxID int64) []store.MessageMeta {
	t.Helper()
	ms, err := s.UIDs(ctx(t), mailboxID)
	if err != nil {
		t.Fatalf("UIDs: %v", err)
	}
	return ms
}

func stats(t *testing.T, s store.Store) store.Stats {
	t.Helper()
	st, err := s.Stats(ctx(t))
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func equalUIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mailboxNames(t *testing.T, s store.Store, accountID int64) []string {
	t.Helper()
	mbs, err := s.Mailboxes(ctx(t), accountID)
	if err != nil {
		t.Fatalf("Mailboxes: %v", err)
	}
	var names []string
	for _, m := range mbs {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names
}

// corpusDir is the test corpus, testdata/corpus in the module.
func corpusDir(t *testing.T) string {
	t.Helper()
	dir, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
