package blackbox

import (
	"sync"
	"testing"
	"time"

	"pimail/internal/pgtest"
)

// The black-box tests on PostgreSQL: a real PostgreSQL (pgtest: initdb in
// a temporary directory, a unix socket) started by the first test that
// needs it, a new database for every server.

var (
	pgOnce sync.Once
	pgSrv  *pgtest.Server
	pgErr  error
	// onPostgres, while on, makes NewServer put the store of every
	// server it makes in a new PostgreSQL database (TestOnPostgres;
	// the tests here run one at a time).
	onPostgres bool
)

// postgresDatabase returns the URL of a new database.
func postgresDatabase(t *testing.T) string {
	t.Helper()
	pgOnce.Do(func() {
		pgSrv, pgErr = pgtest.Start(pgtest.Options{})
	})
	if pgErr != nil && pgErr != pgtest.ErrNoPostgres {
		t.Fatalf("start PostgreSQL: %v", pgErr)
	}
	return pgtest.Database(t, pgSrv)
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
// ManageSieve and Sieve (SieveThroughTheBinary) and the webmail with its
// sessions (WebmailSessionSurvivesRestart). The tests that look into a
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			onPostgres = true
			defer func() { onPostgres = false }()
			start := time.Now()
			tc.fn(t)
			t.Logf("on PostgreSQL in %v", time.Since(start).Round(time.Millisecond))
		})
	}
}
