package sieve

import (
	"fmt"

	"pimail/internal/message"
	"strings"
	"testing"
)

// rules20 is a script of 20 rules of the kinds users write; none matches
// defaultMsg, so every test runs.
var rules20 = func() string {
	var b strings.Builder
	b.WriteString(`require ["fileinto", "imap4flags", "envelope", "subaddress"];` + "\n")
	for i := range 5 {
		fmt.Fprintf(&b, "if header :contains \"list-id\" \"list%d.example.org\" { fileinto \"Lists/l%d\"; stop; }\n", i, i)
		fmt.Fprintf(&b, "if address :domain :is \"from\" \"sender%d.example\" { fileinto \"Senders/s%d\"; stop; }\n", i, i)
		fmt.Fprintf(&b, "if header :matches \"subject\" \"*[project-%d]*\" { addflag \"$Project%d\"; fileinto \"Projects\"; stop; }\n", i, i)
		fmt.Fprintf(&b, "if anyof (envelope :detail \"to\" \"tag%d\", header :contains \"to\" \"team%d@example.com\") { addflag \"\\\\Flagged\"; }\n", i, i)
	}
	return b.String()
}()

// BenchmarkRun20Rules is one run of a parsed 20-rule script on a parsed
// message: the interpreter's cost per message and recipient.
func BenchmarkRun20Rules(b *testing.B) {
	s, err := Parse(rules20)
	if err != nil {
		b.Fatal(err)
	}
	in := input(defaultMsg)
	in.Parsed = nil
	res, err := s.Run(in, Limits{})
	if err != nil || describe(res) != "keep(implicit)" {
		b.Fatalf("%v %q", err, describe(res))
	}
	in = input(defaultMsg)
	in.Parsed = message.Parse(in.Raw)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Run(in, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse20Rules parses the 20-rule script (done once per script
// change: delivery caches parsed scripts).
func BenchmarkParse20Rules(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if _, err := Parse(rules20); err != nil {
			b.Fatal(err)
		}
	}
}
