package webmail

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pimail/internal/testcorpus"
)

// benchRequest serves one GET for a logged-in session without the network,
// so the time measured is the server's own: "warm" with the server's caches
// of rendered list rows, index entries and message text, "cold" with them
// off (every request reads the store and renders everything, as the first
// view of a message or of a changed mailbox does).
func benchRequest(b *testing.B, f *fixture, path string) {
	b.Run("warm", func(b *testing.B) { benchServe(b, f, path) })
	b.Run("cold", func(b *testing.B) {
		rows, metas, bodies := f.srv.rows, f.srv.metas, f.srv.bodies
		f.srv.rows, f.srv.metas, f.srv.bodies = newLRU[rowsKey, rowsEntry](0), newLRU[msgKey, metaEntry](0), newLRU[int64, *bodyView](0)
		defer func() { f.srv.rows, f.srv.metas, f.srv.bodies = rows, metas, bodies }()
		benchServe(b, f, path)
	})
}

func benchServe(b *testing.B, f *fixture, path string) {
	b.Helper()
	sess, err := f.srv.sessions.Create(context.Background(), f.ids["alice@example.com"], "alice@example.com", "", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", path, nil)
	req.AddCookie(&http.Cookie{Name: "pimail", Value: sess.ID})
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		rec := httptest.NewRecorder()
		f.srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
		n++
	}
	// CPU time of the whole process per request (GC and the store's
	// goroutines included): steadier than ns/op on a shared, loaded host.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n), "cpu-µs/op")
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchFixture(b *testing.B, inbox int) *fixture {
	f := newFixture(b)
	for i := range inbox {
		f.deliver(b, "carol@example.net", []string{"alice@example.com"},
			fmt.Sprintf("From: Carol <carol@example.net>\nTo: alice@example.com\nSubject: message number %d\nDate: Mon, 2 Jan 2006 15:04:05 +0000\n\n%s\n", i, strings.Repeat("some text here ", 50)))
	}
	return f
}

// BenchmarkInboxPage renders the first page (50 rows) of a 500-message inbox.
func BenchmarkInboxPage(b *testing.B) {
	f := benchFixture(b, 500)
	benchRequest(b, f, "/box/"+itoa(f.box(b, "alice@example.com", "INBOX").ID))
}

func big(n int, line string) string {
	var s strings.Builder
	for s.Len() < n {
		s.WriteString(line)
	}
	return s.String()
}

// BenchmarkReadPlain120K reads a 120 KB text/plain message.
func BenchmarkReadPlain120K(b *testing.B) {
	f := benchFixture(b, 0)
	f.deliver(b, "carol@example.net", []string{"alice@example.com"}, "From: carol@example.net\nSubject: big\n\n"+
		big(120_000, "A line of text with a link https://example.org/a/b?c=d and more words.\n"))
	benchRequest(b, f, "/msg/"+itoa(f.box(b, "alice@example.com", "INBOX").ID)+"/1")
}

const htmlLine = `<p style="color: #333">A paragraph with <b>bold</b>, <a href="https://example.org/x">a link</a> and <img src="https://img.example/a.png"> image.</p>` + "\n"

// BenchmarkReadHTML120K is the read page plus its sanitised body frame
// (sanitised once, then served from the cache: blobs never change).
func BenchmarkReadHTML120K(b *testing.B) {
	f := benchFixture(b, 0)
	f.deliver(b, "carol@example.net", []string{"alice@example.com"}, "From: carol@example.net\nSubject: big\nContent-Type: text/html\n\n"+big(120_000, htmlLine))
	id := itoa(f.box(b, "alice@example.com", "INBOX").ID)
	b.Run("page", func(b *testing.B) { benchRequest(b, f, "/msg/"+id+"/1") })
	b.Run("body", func(b *testing.B) { benchServe(b, f, "/msg/"+id+"/1/body") })
}

// BenchmarkSanitize120K is the uncached cost of sanitising a 120 KB body:
// what the first view of such a message pays.
func BenchmarkSanitize120K(b *testing.B) {
	z := newSanitizer()
	in := big(120_000, htmlLine)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		z.sanitize(in, false, nil)
	}
}

// BenchmarkReadPlain120KFewLinks is a 120 KB text message with ordinary
// prose (one link per 2 KB), closer to real mail than a link per line.
func BenchmarkReadPlain120KFewLinks(b *testing.B) {
	f := benchFixture(b, 0)
	f.deliver(b, "carol@example.net", []string{"alice@example.com"}, "From: carol@example.net\nSubject: big\n\n"+
		big(120_000, strings.Repeat("A line of ordinary prose, seventy characters long or thereabouts.\n", 30)+"See https://example.org/x\n"))
	benchRequest(b, f, "/msg/"+itoa(f.box(b, "alice@example.com", "INBOX").ID)+"/1")
}

// corpusMessages returns the first n messages of the shared corpus mbox
// (../shared/corpus), or skips the benchmark without it.
func corpusMessages(b *testing.B, n int) []string {
	dir, err := testcorpus.LargeDir()
	if err != nil {
		b.Skip(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "mailbox", "mailbox-1k.mbox"))
	if err != nil {
		b.Skipf("corpus: %v", err)
	}
	var out []string
	for _, m := range strings.Split("\n"+string(raw), "\nFrom ")[1:] {
		_, m, _ = strings.Cut(m, "\n") // the "From " line
		out = append(out, strings.ReplaceAll(m, "\n>From ", "\nFrom "))
		if len(out) == n {
			break
		}
	}
	return out
}

// BenchmarkReadPlain1K reads a 1 KB text/plain message.
func BenchmarkReadPlain1K(b *testing.B) {
	f := benchFixture(b, 0)
	f.deliver(b, "carol@example.net", []string{"alice@example.com"}, "From: carol@example.net\nSubject: small\n\n"+
		big(950, "A line of ordinary prose, seventy characters long or thereabouts.\n"))
	benchRequest(b, f, "/msg/"+itoa(f.box(b, "alice@example.com", "INBOX").ID)+"/1")
}

// BenchmarkLoadMix is the webbench load (list the inbox, open a random
// message of its first page, alternately) over 200 corpus messages and the
// three sized ones, from 10 concurrent sessions: CPU per request.
func BenchmarkLoadMix(b *testing.B) {
	f := benchFixture(b, 0)
	for _, m := range corpusMessages(b, 200) {
		f.deliver(b, "seed@corpus.bench.test", []string{"alice@example.com"}, m)
	}
	for _, size := range []int{1000, 20000, 120000} {
		f.deliver(b, "sender@corpus.bench.test", []string{"alice@example.com"},
			fmt.Sprintf("From: sender@corpus.bench.test\nSubject: rcbench size %d\n\n%s\n", size, big(size-60, "A line of ordinary prose, seventy characters long or thereabouts.\n")))
	}
	inbox := "/box/" + itoa(f.box(b, "alice@example.com", "INBOX").ID)
	metas := f.metas(b, "alice@example.com", "INBOX")
	var page []string
	for i := len(metas) - 1; i >= 0 && len(page) < 50; i-- {
		page = append(page, "/msg/"+itoa(metas[i].MailboxID)+"/"+strconv.FormatUint(uint64(metas[i].UID), 10))
	}
	b.ReportAllocs()
	b.SetParallelism(5)
	cpu0 := cpuTime()
	var n atomic.Int64
	var seq atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		sess, err := f.srv.sessions.Create(context.Background(), f.ids["alice@example.com"], "alice@example.com", "", time.Now())
		if err != nil {
			b.Error(err)
			return
		}
		ck := &http.Cookie{Name: "pimail", Value: sess.ID}
		rng := rand.New(rand.NewPCG(uint64(seq.Add(1)), 1))
		for k := 0; pb.Next(); k++ {
			path := inbox
			if k%2 == 1 {
				path = page[rng.IntN(len(page))]
			}
			req := httptest.NewRequest("GET", path, nil)
			req.AddCookie(ck)
			rec := httptest.NewRecorder()
			f.srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Errorf("%s: %d", path, rec.Code)
				return
			}
			n.Add(1)
		}
	})
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n.Load()), "cpu-µs/op")
}
