package mailimport

import (
	"context"
	"path/filepath"
	"testing"

	"pimail/internal/metrics"
	"pimail/internal/testcorpus"
)

// Benchmarks on the real corpus; run with
//
//	go test -run '^$' -bench . -benchtime 1x ./internal/mailimport
//
// They report msgs/s and the process's peak RSS.

func benchMbox(b *testing.B, file string) {
	dir, err := testcorpus.LargeDir()
	if err != nil {
		b.Skip(err)
	}
	path := filepath.Join(dir, "mailbox", file)
	n := 0
	for range b.N {
		b.StopTimer()
		st := newStore(b)
		im := newImporter(b, st)
		b.StartTimer()
		if err := im.ImportMboxFile(context.Background(), path, "bench", MboxRD); err != nil {
			b.Fatal(err)
		}
		n += im.Stats().Messages
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(metrics.PeakRSS())/(1<<20), "peakRSS-MiB")
}

func BenchmarkImportMbox1k(b *testing.B) { benchMbox(b, "mailbox-1k.mbox") }
func BenchmarkImportMbox9k(b *testing.B) { benchMbox(b, "mailbox-9k.mbox") }

// BenchmarkImportIMAP1k copies the 1k mailbox from a pimail IMAP server on
// loopback into a second store.
func BenchmarkImportIMAP1k(b *testing.B) {
	dir, err := testcorpus.LargeDir()
	if err != nil {
		b.Skip(err)
	}
	path := filepath.Join(dir, "mailbox", "mailbox-1k.mbox")
	n := 0
	for range b.N {
		b.StopTimer()
		src := newBenchSource(b, path)
		dst := newStore(b)
		im := newImporter(b, dst)
		b.StartTimer()
		o := src.source(filepath.Join(b.TempDir(), "state"))
		o.Batch = DefaultBatch
		if err := im.ImportIMAP(context.Background(), o); err != nil {
			b.Fatal(err)
		}
		if im.Stats().Messages != 1046 {
			b.Fatalf("imported %d", im.Stats().Messages)
		}
		n += im.Stats().Messages
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(metrics.PeakRSS())/(1<<20), "peakRSS-MiB")
}

// newBenchSource is an IMAP source whose INBOX holds the mbox file.
func newBenchSource(b *testing.B, path string) *imapSource {
	src := newIMAPSource(b)
	im := newImporter(b, src.st)
	if err := im.ImportMboxFile(context.Background(), path, "INBOX", MboxRD); err != nil {
		b.Fatal(err)
	}
	return src
}
