package blackbox

import (
	"strings"
	"sync"
	"testing"

	"pimail/internal/pgtest"
)

// The black-box tests on PostgreSQL: a real PostgreSQL (pgtest: initdb in
// a temporary directory, a unix socket) started by the first test that
// needs it, a new database for every server.

var (
	pgOnce sync.Once
	pgSrv  *pgtest.Server
	pgErr  error
	// pgTests records the tests that made a PostgreSQL database.
	pgTests sync.Map
)

// onPostgres reports whether NewServer puts the store of the servers of
// test t in PostgreSQL: for the subtests of TestOnPostgres. It goes by
// the test's name, not by a switch, because most of those tests run in
// parallel (t.Parallel), after TestOnPostgres's loop has ended.
func onPostgres(t *testing.T) bool {
	return strings.HasPrefix(t.Name(), "TestOnPostgres/")
}

// postgresDatabase returns the URL of a new database.
func postgresDatabase(t *testing.T) string {
	t.Helper()
	pgOnce.Do(func() {
		pgSrv, pgErr = pgtest.Start(pgtest.Options{})
	})
	if pgErr != nil && pgErr != pgtest.ErrNoPostgres {
		t.Fatalf("start PostgreSQL: %v", pgErr)
	}
	u := pgtest.Database(t, pgSrv)
	pgTests.Store(t.Name(), true)
	return u
}

func stopPostgres() {
	if pgSrv != nil {
		pgSrv.Stop()
	}
}

// TestOnPostgres runs black-box tests of every protocol once more with
// the store in PostgreSQL: SMTP in and IMAP, mbsync and mutt out
// (DeliveryRoundTrip), IDLE (IdleSeesDelivery), the IMAP extensions
// (InteropIMAPImaplib), CONDSTORE/QRESYNC (QRESYNCReconnect), sessions
// changing one mailbox at once (IMAPConcurrentSequenceNumbers), SEARCH
// against a brute-force scan (SearchBruteForce), POP3 (InteropPOP3Poplib),
// submission (SubmissionClients), SCRAM (SCRAMIMAPPOP3), quotas
// (IMAPQuotaCopyMove), the outbound queue with SRS (ForwardSRS),
// ManageSieve and Sieve (SieveThroughTheBinary), the webmail with its
// sessions (WebmailSessionSurvivesRestart) and the address book over
// CardDAV and the webmail (CardDAVVdirsyncer). Each must have made its
// servers on PostgreSQL. The tests that look into a
// data directory's files (crash, backup, upgrade, disk full, single copy)
// stay on SQLite; the cluster tests (cluster_test.go) kill nodes on
// PostgreSQL.
func TestOnPostgres(t *testing.T) {
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"DeliveryRoundTrip", TestDeliveryRoundTrip},
		{"IdleSeesDelivery", TestIdleSeesDelivery},
		{"InteropIMAPImaplib", TestInteropIMAPImaplib},
		{"QRESYNCReconnect", TestQRESYNCReconnect},
		{"IMAPConcurrentSequenceNumbers", TestIMAPConcurrentSequenceNumbers},
		{"SearchBruteForce", TestSearchBruteForce},
		{"InteropPOP3Poplib", TestInteropPOP3Poplib},
		{"SubmissionClients", TestSubmissionClients},
		{"SCRAMIMAPPOP3", TestSCRAMIMAPPOP3},
		{"IMAPQuotaCopyMove", TestIMAPQuotaCopyMove},
		{"ForwardSRS", TestForwardSRS},
		{"SieveThroughTheBinary", TestSieveThroughTheBinary},
		{"WebmailSessionSurvivesRestart", TestWebmailSessionSurvivesRestart},
		{"CardDAVVdirsyncer", TestCardDAVVdirsyncer},
	}
	var ran sync.Map
	// After the parallel subtests have ended (without PostgreSQL
	// installed they skip, see pgtest.Need).
	t.Cleanup(func() {
		if _, err := pgtest.BinDir(); err != nil || t.Failed() {
			return
		}
		ran.Range(func(name, _ any) bool {
			if _, ok := pgTests.Load(name); !ok {
				t.Errorf("%s made no server on PostgreSQL", name)
			}
			return true
		})
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ran.Store(t.Name(), true)
			tc.fn(t)
		})
	}
}
