package sieve

import (
	"testing"
	"time"
)

func TestHeaderAddressExistsSize(t *testing.T) {
	in := input(defaultMsg)
	cases := []struct {
		require, test string
		want          bool
	}{
		{"", `header :is "subject" "[acme-users] [fwd] version 1.0 is out"`, true},
		{"", `header :is "SUBJECT" "[ACME-USERS] [FWD] VERSION 1.0 IS OUT"`, true}, // i;ascii-casemap
		{"", `header :comparator "i;octet" :is "subject" "[ACME-USERS] [FWD] VERSION 1.0 IS OUT"`, false},
		{"", `header :contains ["x-nope", "subject"] "version"`, true},
		{"", `header :matches "subject" "*1.?*"`, true},
		{"", `header :matches "subject" "\\[acme*"`, true},
		{"", `header :matches "subject" "acme*"`, false},
		{"", `header :contains "subject" ""`, true},
		{"", `header :contains "x-nope" ""`, false},
		{"", `address :is "from" "sender@example.net"`, true},
		{"", `address :localpart :is "from" "sender"`, true},
		{"", `address :domain :is ["to", "cc"] "EXAMPLE.ORG"`, true},
		{"", `address :all :contains "to" "other+"`, true},
		{"", `exists ["from", "date"]`, true},
		{"", `exists ["from", "x-nope"]`, false},
		{"", `not exists "x-nope"`, true},
		{"", `size :over 100`, true},
		{"", `size :under 1K`, true},
		{"", `size :over 1M`, false},
		{"", `allof (true, exists "from", not false)`, true},
		{"", `anyof (false, not true)`, false},
		{"", `true`, true},
		{"", `false`, false},
		{`require "envelope";`, `envelope :is "from" "sender@example.net"`, true},
		{`require "envelope";`, `envelope :domain :is "to" "example.com"`, true},
		{`require "envelope";`, `envelope :localpart :is "to" "me+detail"`, true},
	}
	for _, c := range cases {
		if got := truth(t, c.require, c.test, in); got != c.want {
			t.Errorf("%s: %v; want %v", c.test, got, c.want)
		}
	}
	// Encoded words are decoded for header (RFC 5228 §5.7, RFC 2047).
	in2 := input(msg("x", "From: a@b.org", "Subject: =?utf-8?q?caf=C3=A9_au_lait?="))
	if !truth(t, "", `header :contains "subject" "café"`, in2) {
		t.Error("encoded word not decoded")
	}
	// The null reverse-path is "" (RFC 5228 §5.4).
	in3 := input(defaultMsg)
	in3.From = ""
	if !truth(t, `require "envelope";`, `envelope :is "from" ""`, in3) {
		t.Error("null sender is not the empty string")
	}
}

// TestRelationalRFC5231 runs the examples of RFC 5231 §7.
func TestRelationalRFC5231(t *testing.T) {
	m := msg("body",
		"Received: ...", "Received: ...", "Subject: example",
		"To: foo@example.com.invalid, baz@example.com.invalid", "Cc: qux@example.com.invalid")
	req := `require ["relational", "comparator-i;ascii-numeric"];`
	cases := []struct {
		test string
		want bool
	}{
		{`address :count "ge" :comparator "i;ascii-numeric" ["to", "cc"] ["3"]`, true},
		{`anyof ( address :count "ge" :comparator "i;ascii-numeric" ["to"] ["3"], address :count "ge" :comparator "i;ascii-numeric" ["cc"] ["3"] )`, false},
		{`header :count "ge" :comparator "i;ascii-numeric" ["received"] ["3"]`, false},
		{`header :count "ge" :comparator "i;ascii-numeric" ["received", "subject"] ["3"]`, true},
		{`header :count "ge" :comparator "i;ascii-numeric" ["to", "cc"] ["3"]`, false},
	}
	for _, c := range cases {
		if got := truth(t, req, c.test, input(m)); got != c.want {
			t.Errorf("%s: %v; want %v", c.test, got, c.want)
		}
	}
	// :value with the numeric comparator, and its infinity rule (RFC
	// 4790 §9.1).
	for _, c := range []struct {
		test string
		want bool
	}{
		{`header :value "lt" :comparator "i;ascii-numeric" "x-priority" "3"`, true},
		{`header :value "gt" :comparator "i;ascii-numeric" "x-priority" "3"`, false},
		{`header :value "gt" :comparator "i;ascii-numeric" "subject" "99999999999999999999999"`, true},
		{`header :value "eq" :comparator "i;ascii-numeric" "x-priority" "0001"`, true},
		{`header :value "ne" "subject" "a"`, true},
		{`header :value "ge" "subject" "[ACME"`, true},
	} {
		if got := truth(t, req, c.test, input(defaultMsg)); got != c.want {
			t.Errorf("%s: %v; want %v", c.test, got, c.want)
		}
	}
}

// TestSubaddressRFC5233 runs the examples of RFC 5233 §6.
func TestSubaddressRFC5233(t *testing.T) {
	script := `require ["envelope", "subaddress", "fileinto"];
if envelope :user "to" "postmaster" { fileinto "inbox.postmaster"; stop; }
if envelope :detail :is "to" "mta-filters" { fileinto "inbox.ietf-mta-filters"; stop; }
if envelope :detail "to" "" { fileinto "inbox.detail.empty"; stop; }
fileinto "none";`
	for to, want := range map[string]string{
		"postmaster+x@example.org":    "fileinto:inbox.postmaster",
		"ken+mta-filters@example.org": "fileinto:inbox.ietf-mta-filters",
		"ken+@example.org":            "fileinto:inbox.detail.empty",
		"ken@example.org":             "fileinto:none", // :detail of no detail matches nothing
	} {
		in := input(defaultMsg)
		in.To = to
		if got := describe(mustRun(t, script, in)); got != want {
			t.Errorf("to %s: %q; want %q", to, got, want)
		}
	}
	if !truth(t, `require "subaddress";`, `address :detail "to" "lists"`, input(defaultMsg)) {
		t.Error("address :detail")
	}
	if !truth(t, `require "subaddress";`, `address :user :is "to" "other"`, input(defaultMsg)) {
		t.Error("address :user")
	}
}

func TestBody(t *testing.T) {
	multi := msg(`--b
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Caf=C3=A9 tonight, make money fast?
--b
Content-Type: text/html

<p>Hidden <b>TREASURE</b> &amp; more</p><script>var secret=1;</script>
--b
Content-Type: application/octet-stream
Content-Disposition: attachment; filename=a.bin
Content-Transfer-Encoding: base64

c2VjcmV0IGJpbmFyeQ==
--b--
`, "From: a@b.org", "Subject: body test", "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="b"`)
	req := `require "body";`
	cases := []struct {
		test string
		want bool
	}{
		// RFC 5173 §7's first example.
		{`body :text :contains "MAKE MONEY FAST"`, true},
		{`body :contains "café"`, true},                  // decoded quoted-printable
		{`body :text :contains "treasure & more"`, true}, // HTML as text
		{`body :text :contains "secret"`, false},         // no script, no attachment
		{`body :raw :contains "Caf=C3=A9"`, true},        // :raw is undecoded
		{`body :raw :contains "café"`, false},            //
		{`body :content "application/octet-stream" :contains "secret binary"`, true},
		{`body :content "text" :contains "<b>TREASURE</b>"`, true},
		{`body :content "text/plain" :contains "TREASURE"`, false},
		{`body :content "" :contains "secret binary"`, true},
		{`body :content "image" :contains ""`, false},
	}
	for _, c := range cases {
		if got := truth(t, req, c.test, input(multi)); got != c.want {
			t.Errorf("%s: %v; want %v", c.test, got, c.want)
		}
	}
}

// TestDate runs RFC 5260's examples and each date part.
func TestDate(t *testing.T) {
	req := `require ["date", "relational"];`
	// Date: Fri, 19 Aug 2005 20:34:46 +0100 in the default message.
	cases := []struct {
		test string
		want bool
	}{
		{`date :originalzone "date" "hour" "20"`, true},
		{`date :zone "+0000" "date" "hour" "19"`, true},
		{`date :zone "-0500" "date" "date" "2005-08-19"`, true},
		{`date :originalzone "date" "year" "2005"`, true},
		{`date :originalzone "date" "month" "08"`, true},
		{`date :originalzone "date" "day" "19"`, true},
		{`date :originalzone "date" "minute" "34"`, true},
		{`date :originalzone "date" "second" "46"`, true},
		{`date :originalzone "date" "time" "20:34:46"`, true},
		{`date :originalzone "date" "julian" "53601"`, true},
		{`date :originalzone "date" "iso8601" "2005-08-19T20:34:46+01:00"`, true},
		{`date :originalzone "date" "std11" "Fri, 19 Aug 2005 20:34:46 +0100"`, true},
		{`date :originalzone "date" "zone" "+0100"`, true},
		{`date :originalzone "date" "weekday" "5"`, true},
		{`date "date" "zone" "+0000"`, true}, // the local zone (UTC here)
		{`date :value "ge" :originalzone "date" "hour" "09"`, true},
		{`date :value "lt" :originalzone "date" "hour" "17"`, false},
		{`date "x-nope" "year" "2005"`, false},
		{`date "subject" "year" "2005"`, false}, // not a date
		// currentdate: Sunday 2024-03-10 15:04:05 UTC.
		{`currentdate "weekday" "0"`, true},
		{`currentdate :zone "+0900" "date" "2024-03-11"`, true},
		{`currentdate :value "ge" "hour" "09"`, true},
		{`currentdate :value "lt" "date" "2024-04-01"`, true},
	}
	for _, c := range cases {
		if got := truth(t, req, c.test, input(defaultMsg)); got != c.want {
			t.Errorf("%s: %v; want %v", c.test, got, c.want)
		}
	}
	// RFC 5260 §5's example: after hours, redirect to the pager.
	script := `require ["date", "relational"];
if anyof(currentdate :is "weekday" "0",
         currentdate :is "weekday" "6",
         currentdate :value "lt" "hour" "09",
         currentdate :value "ge" "hour" "17")
{ redirect "pager@example.com"; }`
	in := input(defaultMsg)
	if got := describe(mustRun(t, script, in)); got != "redirect:pager@example.com" {
		t.Errorf("Sunday: %q", got)
	}
	in.Now = time.Date(2024, 3, 12, 10, 0, 0, 0, time.UTC) // a Tuesday morning
	if got := describe(mustRun(t, script, in)); got != "keep(implicit)" {
		t.Errorf("Tuesday 10:00: %q", got)
	}
}

// TestSpamtest runs RFC 5235 §3.1's example and :percent.
func TestSpamtest(t *testing.T) {
	script := `require ["spamtest", "fileinto", "relational", "comparator-i;ascii-numeric"];
if spamtest :value "eq" :comparator "i;ascii-numeric" "0" { fileinto "INBOX.unclassified"; }
elsif spamtest :value "ge" :comparator "i;ascii-numeric" "3" { fileinto "INBOX.spam-trap"; }`
	for _, c := range []struct {
		spam Spam
		want string
	}{
		{Spam{}, "fileinto:INBOX.unclassified"},
		{Spam{Tested: true, Value: 1}, "keep(implicit)"},
		{Spam{Tested: true, Value: 7}, "fileinto:INBOX.spam-trap"},
		{Spam{Tested: true, Value: 0}, "keep(implicit)"}, // clamped to 1
	} {
		in := input(defaultMsg)
		in.Spam = c.spam
		if got := describe(mustRun(t, script, in)); got != c.want {
			t.Errorf("%+v: %q; want %q", c.spam, got, c.want)
		}
	}
	in := input(defaultMsg)
	in.Spam = Spam{Tested: true, Value: 8, Percent: 73}
	if !truth(t, `require ["spamtestplus", "relational", "comparator-i;ascii-numeric"];`,
		`spamtest :percent :value "gt" :comparator "i;ascii-numeric" "50"`, in) {
		t.Error(":percent 73 > 50")
	}
	if _, err := Parse(`require "spamtest"; if spamtest :percent "5" { keep; }`); err == nil {
		t.Error(":percent without spamtestplus accepted")
	}
}

// TestMailboxExists runs RFC 5490 §3.1's test.
func TestMailboxExists(t *testing.T) {
	in := input(defaultMsg)
	in.MailboxExists = func(n string) bool { return n == "Junk" || n == "INBOX" }
	req := `require ["mailbox"];`
	if !truth(t, req, `mailboxexists "Junk"`, in) || truth(t, req, `mailboxexists ["Junk", "Nope"]`, in) {
		t.Error("mailboxexists")
	}
}
