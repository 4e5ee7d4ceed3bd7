// Package blackbox holds pimail's black-box tests: they build the real
// binary once per `go test` run, start it on free loopback ports with a
// fresh data directory, provision domains, accounts and aliases through
// its admin commands, and talk to it with real clients (Go's imapclient,
// Python's smtplib and imaplib, swaks, mbsync and mutt).
//
// The client tools are installed by test/all.sh. A test fails when one is
// missing, unless PIMAIL_TEST_SKIP_CLIENTS=1 is set for a quick local run.
package blackbox
