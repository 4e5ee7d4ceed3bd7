package message

import (
	"os"
	"testing"
)

// BenchmarkParseCorpus parses the ham and spam corpus (about 10,000 real
// messages) and reports messages per second.
func BenchmarkParseCorpus(b *testing.B) {
	files := append(corpusFiles(b, "ham/*.eml"), corpusFiles(b, "spam/*.eml")...)
	msgs := make([][]byte, 0, len(files))
	total := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, raw)
		total += len(raw)
	}
	b.SetBytes(int64(total / len(msgs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Parse(msgs[i%len(msgs)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkParseDate parses the Date: forms most mail has (RFC 5322 §3.3,
// with and without the day of the week).
func BenchmarkParseDate(b *testing.B) {
	dates := []string{"Tue, 1 Jul 2003 10:52:37 +0200", "Fri, 27 Nov 2026 09:51:05 +0000 (UTC)", "1 Jul 2003 10:52:37 -0700"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := ParseDate(dates[i%len(dates)]); !ok {
			b.Fatal("not parsed")
		}
		i++
	}
}
