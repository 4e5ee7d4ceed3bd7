package sieve

import (
	"os"
	"testing"

	"pimail/internal/message"
)

// rules20 is a script of 20 rules of the kinds users write, shared with
// the benchmarks of internal/delivery.
var rules20 = func() string {
	b, err := os.ReadFile("testdata/rules20.sieve")
	if err != nil {
		panic(err)
	}
	return string(b)
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
