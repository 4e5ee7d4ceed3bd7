package sieve

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// msg builds a CRLF message from header lines and a body.
func msg(body string, header ...string) []byte {
	return []byte(strings.Join(header, "\r\n") + "\r\n\r\n" + strings.ReplaceAll(body, "\n", "\r\n"))
}

// defaultMsg is the message most tests run on.
var defaultMsg = msg("Hello there.\nMake money fast!\n",
	"Return-Path: <sender@example.net>",
	"Received: from a by b; Mon, 1 Jan 2024 00:00:00 +0000",
	"Received: from c by d; Mon, 1 Jan 2024 00:00:01 +0000",
	"From: Sender Name <sender@example.net>",
	"To: me@example.com, Other <other+lists@example.org>",
	"Cc: qux@example.com",
	"Subject: [acme-users] [fwd] version 1.0 is out",
	"Date: Fri, 19 Aug 2005 20:34:46 +0100",
	"X-Priority: 1",
	"Message-ID: <id1@example.net>")

// input is the envelope most tests use.
func input(raw []byte) Input {
	return Input{
		Raw: raw, From: "sender@example.net", To: "me+detail@example.com",
		Addresses: []string{"me@example.com"},
		Now:       time.Date(2024, 3, 10, 15, 4, 5, 0, time.UTC), // a Sunday
		Zone:      time.UTC,
	}
}

// mustRun parses and runs a script and fails the test on any error.
func mustRun(t *testing.T, script string, in Input) Result {
	t.Helper()
	s, err := Parse(script)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, script)
	}
	res, err := s.Run(in, Limits{})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, script)
	}
	return res
}

// describe renders a result compactly: "fileinto:A keep(implicit)".
func describe(r Result) string {
	var parts []string
	for _, a := range r.Actions {
		s := a.Kind.String()
		switch a.Kind {
		case FileInto:
			s += ":" + a.Mailbox
			if a.Create {
				s += "(create)"
			}
		case Redirect:
			s += ":" + a.Address
		case Reject:
			if a.Extended {
				s = "ereject"
			}
			s += ":" + a.Reason
		case Vacation:
			if a.Reply.Skip != "" {
				s += "(skip)"
			}
		}
		if a.Implicit {
			s += "(implicit)"
		}
		if len(a.Flags) > 0 {
			s += fmt.Sprintf("%v", a.Flags)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// check runs script on the default message and compares the actions.
func check(t *testing.T, script, want string) {
	t.Helper()
	if got := describe(mustRun(t, script, input(defaultMsg))); got != want {
		t.Errorf("actions = %q; want %q\nscript:\n%s", got, want, script)
	}
}

// truth runs "if TEST { keep; } else { discard; }" style checks: it
// reports whether the test held.
func truth(t *testing.T, require, testExpr string, in Input) bool {
	t.Helper()
	script := require + "\nif " + testExpr + " { fileinto \"yes\"; } else { fileinto \"no\"; }"
	if !strings.Contains(require, "fileinto") {
		script = "require \"fileinto\";\n" + script
	}
	res := mustRun(t, script, in)
	return res.Actions[0].Mailbox == "yes"
}
