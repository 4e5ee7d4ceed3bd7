package sieve

import (
	"strings"
	"testing"
)

func TestImplicitKeep(t *testing.T) {
	check(t, ``, "keep(implicit)")
	check(t, `keep;`, "keep")
	check(t, `discard;`, "")
	check(t, `stop; discard;`, "keep(implicit)")
	check(t, `keep; keep;`, "keep")
}

// TestRFC5228Example is the example of RFC 5228 §9, on four messages.
func TestRFC5228Example(t *testing.T) {
	script := `#
# Example Sieve Filter
# Declare any optional features or extension used by the script
#
require ["fileinto"];

#
# Handle messages from known mailing lists
# Move messages from IETF filter discussion list to filter mailbox
#
if header :is "Sender" "owner-ietf-mta-filters@imc.org"
        {
        fileinto "filter";  # move to "filter" mailbox
        }
#
# Keep all messages to or from people in my company
#
elsif address :DOMAIN :is ["From", "To"] "example.com"
        {
        keep;               # keep in "In" mailbox
        }

#
# Try and catch unsolicited email.  If a message is not to me,
# or it contains a subject known to be spam, file it away.
#
elsif anyof (NOT address :all :contains
               ["To", "Cc", "Bcc"] "me@example.com",
             header :matches "subject"
               ["*make*money*fast*", "*university*dipl*mas*"])
        {
        fileinto "spam";   # move to "spam" mailbox
        }
else
        {
        # Move all other (non-company) mail to "personal"
        # mailbox.
        fileinto "personal";
        }
`
	cases := []struct {
		header []string
		want   string
	}{
		{[]string{"Sender: owner-ietf-mta-filters@imc.org", "From: a@b.org", "To: me@example.com"}, "fileinto:filter"},
		{[]string{"From: boss@example.com", "To: me@elsewhere.org"}, "keep"},
		{[]string{"From: x@spam.test", "To: someone@elsewhere.org"}, "fileinto:spam"},
		{[]string{"From: x@spam.test", "To: a@elsewhere.org", "Cc: me@example.com", "Subject: MAKE MONEY FAST now"}, "fileinto:spam"},
		{[]string{"From: friend@elsewhere.org", "To: a@elsewhere.org", "Cc: me@example.com", "Subject: hi"}, "fileinto:personal"},
	}
	for _, c := range cases {
		if got := describe(mustRun(t, script, input(msg("body", c.header...)))); got != c.want {
			t.Errorf("%v: %q; want %q", c.header, got, c.want)
		}
	}
}

func TestFileinto(t *testing.T) {
	check(t, `require "fileinto"; fileinto "Lists/acme";`, "fileinto:Lists/acme")
	check(t, `require "fileinto"; fileinto "a"; fileinto "a"; fileinto "b";`, "fileinto:a fileinto:b")
	// RFC 3894: :copy keeps the implicit keep.
	check(t, `require ["fileinto", "copy"]; fileinto :copy "a";`, "fileinto:a keep(implicit)")
	// RFC 5490 §3.2: :create.
	check(t, `require ["fileinto", "mailbox"]; fileinto :create "New/Box";`, "fileinto:New/Box(create)")
	if _, err := Parse(`require "fileinto"; fileinto :create "x";`); err == nil {
		t.Error(":create without require mailbox accepted")
	}
	if _, err := Parse(`require "fileinto"; fileinto :copy "x";`); err == nil {
		t.Error(":copy without require copy accepted")
	}
}

func TestRedirect(t *testing.T) {
	check(t, `redirect "bob@example.org";`, "redirect:bob@example.org")
	check(t, `redirect "Bob <bob@example.org>"; redirect "BOB@example.org";`, "redirect:bob@example.org")
	// RFC 3894 §3 example.
	check(t, `require ["copy"]; redirect :copy "sales@example.com";`, "redirect:sales@example.com keep(implicit)")
	// Over the limit: a run-time error, and only the implicit keep.
	s, err := Parse(`redirect "a@x.org"; redirect "b@x.org"; redirect "c@x.org";`)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(input(defaultMsg), Limits{MaxRedirects: 2})
	if err == nil || !strings.Contains(err.Error(), "more than 2 redirects") {
		t.Errorf("3 redirects with a limit of 2: err %v", err)
	}
	if got := describe(res); got != "keep(implicit)" {
		t.Errorf("after the error: %q", got)
	}
	// A variable that makes an invalid address fails at run time.
	s, _ = Parse(`require "variables"; set "a" "no address"; redirect "${a}";`)
	if res, err := s.Run(input(defaultMsg), Limits{}); err == nil || describe(res) != "keep(implicit)" {
		t.Errorf("invalid address at run time: %v %q", err, describe(res))
	}
}

func TestReject(t *testing.T) {
	// RFC 5429 §2.1 and §2.2 examples.
	check(t, `require ["ereject"];
if address "from" "sender@example.net" {
    ereject "I no longer accept mail from this address";
}`, "ereject:I no longer accept mail from this address")
	check(t, `require ["reject"];
if header :contains "subject" "acme" {
    reject text:
Your message was refused.
.
;
}`, "reject:Your message was refused.\r\n")
	// Combined with keep, fileinto or redirect: an error, and the
	// message is kept (RFC 5429 §2.1).
	for _, s := range []string{
		`require "reject"; reject "no"; keep;`,
		`require ["reject", "fileinto"]; fileinto "x"; reject "no";`,
		`require "reject"; redirect "a@b.org"; reject "no";`,
		`require ["reject", "ereject"]; reject "no"; ereject "no";`,
		`require ["reject", "vacation"]; vacation "away"; reject "no";`,
	} {
		sc, err := Parse(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		res, err := sc.Run(input(defaultMsg), Limits{})
		if err == nil || describe(res) != "keep(implicit)" {
			t.Errorf("%s: err %v, actions %q; want an error and the implicit keep", s, err, describe(res))
		}
	}
	check(t, `require "reject"; discard; reject "no";`, "reject:no")
}

func TestImap4flags(t *testing.T) {
	// RFC 5232 §6's example, shortened.
	check(t, `require ["imap4flags", "fileinto"];
if header :contains "from" "sender@example.net" {
    setflag "\\Flagged";
    fileinto "urgent";
}`, `fileinto:urgent[\Flagged]`)
	check(t, `require "imap4flags";
addflag ["\\Seen", "$Work"];
addflag "\\seen $Other";
removeflag "$work";
keep;`, `keep[\Seen $Other]`)
	// The implicit keep takes the flags too; :flags overrides.
	check(t, `require ["imap4flags", "fileinto"];
setflag "\\Answered";
fileinto :flags "\\Draft" "drafts";
if hasflag :contains "answer" { fileinto "has"; }`, `fileinto:drafts[\Draft] fileinto:has[\Answered]`)
	check(t, `require ["imap4flags"]; addflag "$A"; keep :flags ["$B"];`, `keep[$B]`)
	check(t, `require ["imap4flags"]; addflag "$A";`, `keep(implicit)[$A]`)
	// The variable form (RFC 5232 §3 with RFC 5229).
	check(t, `require ["imap4flags", "variables", "fileinto"];
setflag "myflags" "$One";
addflag "myflags" "$Two";
if hasflag "myflags" "$two" { fileinto "two"; }
if string "${myflags}" "$One $Two" { fileinto "string"; }
if hasflag "$One" { fileinto "internal"; }`, "fileinto:two fileinto:string")
}

func TestVariablesRFC5229(t *testing.T) {
	// RFC 5229 §3's example.
	res := mustRun(t, `require ["variables", "vacation"];
set "honorific"  "Mr";
set "first_name" "Wile";
set "last_name"  "Coyote";
set "vacation" text:
Dear ${HONORIFIC} ${last_name},
I'm out, please leave a message after the meep.
.
;
vacation :subject "Gone" "${vacation}";`, input(defaultMsg))
	if got, want := res.Actions[0].Reply.Reason, "Dear Mr Coyote,\r\nI'm out, please leave a message after the meep.\r\n"; got != want {
		t.Errorf("expanded text %q; want %q", got, want)
	}
	// RFC 5229 §4.1's modifier examples.
	for _, c := range []struct{ mods, want string }{
		{":length", "15"},
		{":lower", "jumbled letters"},
		{":upper", "JUMBLED LETTERS"},
		{":upperfirst", "JuMBlEd lETteRS"},
		{":upperfirst :lower", "Jumbled letters"},
		{":lowerfirst :upper", "jUMBLED LETTERS"},
	} {
		s := `require ["variables", "fileinto"];
set "a" "juMBlEd lETteRS";
set ` + c.mods + ` "b" "${a}";
fileinto "${b}";`
		if got := mustRun(t, s, input(defaultMsg)).Actions[0].Mailbox; got != c.want {
			t.Errorf("set %s: %q; want %q", c.mods, got, c.want)
		}
	}
	s := `require ["variables", "fileinto"]; set :quotewildcard "b" "Rock*"; fileinto "${b}";`
	if got := mustRun(t, s, input(defaultMsg)).Actions[0].Mailbox; got != `Rock\*` {
		t.Errorf(":quotewildcard: %q", got)
	}
	// Match variables (RFC 5229 §3.2): leftmost shortest.
	check(t, `require ["variables", "fileinto"];
if header :matches "Subject" "[*] *" {
    fileinto "lists/${1}/${2}";
    stop;
}`, "fileinto:lists/acme-users/[fwd] version 1.0 is out")
	check(t, `require ["variables", "fileinto"];
if address :matches ["To", "Cc"] ["other*@**.org"] { fileinto "${0}|${1}|${2}|${3}"; }`,
		"fileinto:other+lists@example.org|+lists||example")
	// Unknown variables are empty; malformed references stay as written.
	check(t, `require ["variables", "fileinto"]; fileinto "a${nosuch}b${x.y}c${}";`, "fileinto:ab${x.y}c${}")
	// Names are case-insensitive; string's :count ignores empty strings.
	check(t, `require ["variables", "fileinto", "relational", "comparator-i;ascii-numeric"];
set "Var" "v";
if string :is "${VAR}" "v" { fileinto "ci"; }
if string :count "eq" :comparator "i;ascii-numeric" ["a", "", "b"] "2" { fileinto "count"; }`, "fileinto:ci fileinto:count")
}

func TestEncodedCharacter(t *testing.T) {
	// RFC 5228 §2.4.2.4's examples.
	check(t, `require ["encoded-character", "fileinto"];
fileinto "$${hex:24 24}${unicode:40}${HEX: 40}${hex:zz}";`, "fileinto:$$$@@${hex:zz}")
}

func TestVacationCommand(t *testing.T) {
	// RFC 5230 §3's example.
	script := `require "vacation";
if header :contains "subject" "cyrus" {
    vacation "I'm out -- send mail to cyrus-bugs";
} else {
    vacation "I'm out -- call me at 321-1723";
}`
	res := mustRun(t, script, input(defaultMsg))
	if describe(res) != "vacation keep(implicit)" {
		t.Fatalf("actions %q", describe(res))
	}
	v := res.Actions[0].Reply
	if v.Reason != "I'm out -- call me at 321-1723" || v.Days != 7 || v.Recipient != "sender@example.net" || v.Skip != "" || v.Handle == "" {
		t.Errorf("reply %+v", v)
	}
	res2 := mustRun(t, `require "vacation"; vacation :days 400 :subject "Away" :from "me@example.com" :handle "h1" :mime "x";`, input(defaultMsg))
	v2 := res2.Actions[0].Reply
	if v2.Days != MaxVacationDays || v2.Subject != "Away" || v2.From != "me@example.com" || v2.Handle != "h1" || !v2.MIME {
		t.Errorf("reply with arguments %+v", v2)
	}
	// The handle follows the text: a new text is a new handle (RFC 5230 §4.2).
	res3 := mustRun(t, `require "vacation"; vacation "other text";`, input(defaultMsg))
	if res3.Actions[0].Reply.Handle == v.Handle {
		t.Error("different texts share a handle")
	}
	if _, err := mustParse(t, `require "vacation"; vacation "a"; vacation "b";`).Run(input(defaultMsg), Limits{}); err == nil {
		t.Error("two vacation actions accepted")
	}
}

// TestVacationNotToListsOrAutomatic: the rules of RFC 5230 §4.5 and RFC
// 3834 §2.
func TestVacationNotToListsOrAutomatic(t *testing.T) {
	base := []string{"From: a@example.net", "To: me@example.com", "Subject: hi"}
	cases := []struct {
		from   string
		header []string
		skip   string
	}{
		{"a@example.net", nil, ""},
		{"", nil, "null sender"},
		{"MAILER-DAEMON@example.net", nil, "automatic"},
		{"owner-list@example.net", nil, "automatic"},
		{"list-request@example.net", nil, "automatic"},
		{"a@example.net", []string{"Auto-Submitted: auto-replied"}, "Auto-Submitted"},
		{"a@example.net", []string{"Auto-Submitted: auto-generated; type=x"}, "Auto-Submitted"},
		{"a@example.net", []string{"Auto-Submitted: no"}, ""},
		{"a@example.net", []string{"List-Id: <list.example.net>"}, "mailing list"},
		{"a@example.net", []string{"List-Unsubscribe: <mailto:x@example.net>"}, "mailing list"},
		{"a@example.net", []string{"Precedence: bulk"}, "Precedence"},
		{"a@example.net", []string{"Precedence: list"}, "Precedence"},
	}
	for _, c := range cases {
		in := input(msg("x", append(append([]string{}, base...), c.header...)...))
		in.From = c.from
		v := mustRun(t, `require "vacation"; vacation "away";`, in).Actions[0].Reply
		if (c.skip == "") != (v.Skip == "") || !strings.Contains(v.Skip, c.skip) {
			t.Errorf("from %q %v: skip %q; want %q", c.from, c.header, v.Skip, c.skip)
		}
	}
	// Not addressed to the user: no reply, unless :addresses names the
	// address it came to.
	in := input(msg("x", "From: a@example.net", "To: list@example.org"))
	if v := mustRun(t, `require "vacation"; vacation "away";`, in).Actions[0].Reply; !strings.Contains(v.Skip, "none of the user's addresses") {
		t.Errorf("not to the user: skip %q", v.Skip)
	}
	if v := mustRun(t, `require "vacation"; vacation :addresses ["list@example.org"] "away";`, in).Actions[0].Reply; v.Skip != "" {
		t.Errorf("with :addresses: skip %q", v.Skip)
	}
	// A subaddress of the user's address counts as the user's.
	in = input(msg("x", "From: a@example.net", "Cc: Me <ME+tag@Example.com>"))
	if v := mustRun(t, `require "vacation"; vacation "away";`, in).Actions[0].Reply; v.Skip != "" {
		t.Errorf("to a subaddress: skip %q", v.Skip)
	}
}

func mustParse(t *testing.T, s string) *Script {
	t.Helper()
	sc, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return sc
}

func TestStepLimit(t *testing.T) {
	script := "require \"variables\";\n" + strings.Repeat("set \"a\" \"${a}x\";\n", 50)
	sc := mustParse(t, script)
	res, err := sc.Run(input(defaultMsg), Limits{MaxSteps: 20})
	if err == nil || !strings.Contains(err.Error(), "more than 20 steps") || describe(res) != "keep(implicit)" {
		t.Errorf("step limit: %v %q", err, describe(res))
	}
	if _, err := sc.Run(input(defaultMsg), Limits{}); err != nil {
		t.Errorf("default limit: %v", err)
	}
}
