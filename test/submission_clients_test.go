package blackbox

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
)

// TestSubmissionClients submits with real clients, swaks and Python's
// smtplib, over STARTTLS on the submission port (587-style) and over
// implicit TLS (465-style, RFC 8314 §3.3), with AUTH PLAIN and AUTH LOGIN:
// every message reaches the local recipient, marked as authenticated
// ESMTP over TLS (ESMTPSA, RFC 3848), and a copy is in the sender's Sent
// mailbox. (SCRAM-SHA-256 is in TestTwoServers.) Before STARTTLS no AUTH
// is offered (the smtplib script checks).
func TestSubmissionClients(t *testing.T) {
	t.Parallel()
	swaks := requireTool(t, "swaks")
	python := requireTool(t, "python3")
	srv := NewServer(t, "[tls]\nself_signed = true\n")
	users := srv.AddAccounts("alice", "bob")
	l := withListeners(t, "submission", "submissions")
	srv.StartWith(l)
	stamp := time.Now().UnixNano()

	type run struct {
		client, tls, auth string
	}
	var runs []run
	for _, client := range []string{"swaks", "smtplib"} {
		for _, tls := range []string{"starttls", "implicit"} {
			for _, auth := range []string{"PLAIN", "LOGIN"} {
				runs = append(runs, run{client, tls, auth})
			}
		}
	}
	subject := func(r run) string { return fmt.Sprintf("%s %s %s %d", r.client, r.tls, r.auth, stamp) }
	for _, r := range runs {
		addr := l.Submission
		if r.tls == "implicit" {
			addr = l.Submissions
		}
		switch r.client {
		case "swaks":
			tlsArg := "--tls" // STARTTLS, required
			if r.tls == "implicit" {
				tlsArg = "--tls-on-connect"
			}
			out := string(runTool(t, time.Minute, "", nil, swaks, "--server", addr, tlsArg,
				"--auth", r.auth, "--auth-user", users[0], "--auth-password", testPassword,
				"--from", users[0], "--to", users[1], "--helo", "client.example", "--timeout", "30",
				"--header", "Subject: "+subject(r)))
			if !strings.Contains(out, "<~  235") || !strings.Contains(out, "<~  250") {
				t.Errorf("swaks %s %s: no 235 or no 250 inside TLS in the transcript:\n%s", r.tls, r.auth, out)
			}
			if r.tls == "starttls" {
				// The EHLO reply before STARTTLS (the plain-text "<-"
				// lines) must not offer AUTH.
				before, _, _ := strings.Cut(out, "-> STARTTLS")
				if strings.Contains(before, "AUTH") {
					t.Errorf("swaks: AUTH offered before STARTTLS:\n%s", before)
				}
			}
		case "smtplib":
			runTool(t, time.Minute, "", nil, python, filepath.Join(repoRoot(), "test", "py", "submit.py"),
				"--server", addr, "--tls", r.tls, "--auth", r.auth,
				"--user", users[0], "--password", testPassword, "--to", users[1], "--subject", subject(r))
		}
	}

	bob := imapLogin(t, srv.IMAP, users[1], &imapclient.Options{})
	alice := imapLogin(t, srv.IMAP, users[0], &imapclient.Options{})
	esmtpsa := regexp.MustCompile(`\r\nReceived: from [^\r]*\r\n\tby test\.local with ESMTPSA `)
	for _, r := range runs {
		got := waitMessage(t, bob, "INBOX", subject(r), 30*time.Second)
		if got == "" {
			t.Errorf("%q not delivered to %s", subject(r), users[1])
			continue
		}
		if !strings.HasPrefix(got, "Return-Path: <alice@test.local>\r\n") || !esmtpsa.MatchString(got) {
			t.Errorf("%q: not received as authenticated ESMTP over TLS:\n%s", subject(r), headerOf(got))
		}
		if findMessage(t, alice, "Sent", subject(r)) == "" {
			t.Errorf("%q: no copy in %s's Sent", subject(r), users[0])
		}
	}
}
