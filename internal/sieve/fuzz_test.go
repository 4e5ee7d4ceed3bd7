package sieve

import (
	"testing"
)

// FuzzParse: any input either parses or gives a *Error with a place, and
// a script that parses runs on a message without panicking, ending in at
// least one action or an error that falls back to the implicit keep.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		``,
		`keep;`,
		`require ["fileinto", "variables", "imap4flags", "relational", "comparator-i;ascii-numeric"];
if header :matches "subject" "[*] *" { set :lower "l" "${1}"; addflag "$L"; fileinto :flags "\\Seen" "lists/${l}"; stop; }
elsif address :count "gt" :comparator "i;ascii-numeric" ["to", "cc"] "5" { discard; }`,
		`require ["vacation", "date", "body", "spamtest", "envelope", "subaddress", "mailbox", "copy", "ereject", "encoded-character"];
if allof (spamtest "10", body :text :contains "x", envelope :detail "to" "y", currentdate :zone "+0100" "hour" "01") { ereject "${hex:41}"; }
vacation :days 3 :subject "s" :addresses ["a@b.c"] text:
line
..dot
.
;`,
		`if anyof (not exists "x", size :over 1K) { redirect "a@b.org"; } /* c */ # c`,
	} {
		f.Add(s)
	}
	raw := msg("body text\n", "From: a <a@b.org>", "To: c@d.org", "Subject: [x] y", "Date: Fri, 19 Aug 2005 20:34:46 +0100")
	f.Fuzz(func(t *testing.T, src string) {
		s, err := Parse(src)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		res, err := s.Run(input(raw), Limits{MaxSteps: 1000})
		if err != nil && describe(res) != "keep(implicit)" {
			t.Fatalf("run error %v with actions %q", err, describe(res))
		}
	})
}
