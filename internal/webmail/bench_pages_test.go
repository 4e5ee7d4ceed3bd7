package webmail

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

// tenK fills alice's inbox with 10,000 messages of 1–3 KB: conversations
// of up to five (References and In-Reply-To), a spread of senders,
// subjects and dates, every fiftieth with an attachment.
func tenK(b *testing.B) *fixture {
	f := newFixture(b)
	inbox := f.box(b, "alice@example.com", "INBOX")
	const n = 10000
	t0 := time.Date(2025, 1, 1, 8, 0, 0, 0, time.UTC)
	batch := make([]store.AppendMessage, 0, 500)
	for i := range n {
		root := i - i%5
		var h strings.Builder
		fmt.Fprintf(&h, "From: Sender %d <s%d@example.net>\r\nTo: alice@example.com\r\nDate: %s\r\nMessage-ID: <m%d@example.net>\r\n",
			i%97, i%97, t0.Add(time.Duration(i)*37*time.Minute).Format(time.RFC1123Z), i)
		if i == root {
			fmt.Fprintf(&h, "Subject: topic number %d of the benchmark\r\n", root)
		} else {
			fmt.Fprintf(&h, "Subject: Re: topic number %d of the benchmark\r\nIn-Reply-To: <m%d@example.net>\r\nReferences: <m%d@example.net> <m%d@example.net>\r\n", root, i-1, root, i-1)
		}
		body := strings.Repeat("Some text of the message, a line like many others.\r\n", 20+i%40)
		if i%50 == 0 {
			fmt.Fprintf(&h, "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\n%s\r\n"+
				"--B\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=report.pdf\r\n\r\nJVBERi0K\r\n--B--\r\n", body)
		} else {
			h.WriteString("\r\n" + body)
		}
		batch = append(batch, store.AppendMessage{Raw: []byte(h.String()), InternalDate: t0.Add(time.Duration(i) * 37 * time.Minute)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := f.st.AppendBatch(context.Background(), inbox.ID, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return f
}

// BenchmarkPages10k is the server's time for the pages the issue-27 table
// compares, on a 10,000-message inbox: the inbox (received order), the
// threaded inbox, a message (plain text, 1–3 KB; the newest), and the
// compose page, warm (the caches filled by a first request, as for a user
// who comes back to a page) and, for the inbox kinds, with the order
// computed anew (the first view after new mail). It reports the
// process's CPU per request and the p50 and p99 of the requests' wall
// time.
func BenchmarkPages10k(b *testing.B) {
	f := tenK(b)
	box := itoa(f.box(b, "alice@example.com", "INBOX").ID)
	sess, err := f.srv.sessions.Create(context.Background(), f.ids["alice@example.com"], "alice@example.com", "", time.Now())
	if err != nil {
		b.Fatal(err)
	}
	ck := &http.Cookie{Name: "pimail", Value: sess.ID}
	serve := func(b *testing.B, path string) {
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(ck)
		rec := httptest.NewRecorder()
		f.srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d", path, rec.Code)
		}
	}
	setView := func(b *testing.B, threads bool) {
		v := url.Values{"box": {box}, "sort": {"arrival"}, "order": {"desc"}, "csrf": {sess.CSRF}}
		if threads {
			v.Set("threads", "1")
		}
		req := httptest.NewRequest("POST", "/view", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(ck)
		rec := httptest.NewRecorder()
		f.srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusSeeOther {
			b.Fatalf("view: %d %s", rec.Code, rec.Body)
		}
	}
	measure := func(b *testing.B, path string, before func()) {
		serve(b, path) // fills the caches
		var times []time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime()
		for b.Loop() {
			if before != nil {
				before()
			}
			t := time.Now()
			serve(b, path)
			times = append(times, time.Since(t))
		}
		n := len(times)
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n), "cpu-µs/op")
		slices.Sort(times)
		b.ReportMetric(float64(times[n/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(times[min(n-1, n*99/100)].Microseconds()), "p99-µs")
	}
	f.srv.cfg.PageSize = 50
	b.Run("inbox", func(b *testing.B) { setView(b, false); measure(b, "/box/"+box, nil) })
	b.Run("threaded", func(b *testing.B) { setView(b, true); measure(b, "/box/"+box, nil) })
	b.Run("threaded-cold", func(b *testing.B) {
		setView(b, true)
		measure(b, "/box/"+box, func() {
			f.srv.orders = newLRU[orderKey, *ordered](orderCacheBytes)
			f.srv.rows = newLRU[rowsKey, rowsEntry](rowsCacheBytes)
		})
	})
	b.Run("inbox-page100", func(b *testing.B) { setView(b, false); measure(b, "/box/"+box+"?page=100", nil) })
	b.Run("message", func(b *testing.B) { measure(b, "/msg/"+box+"/10000", nil) })
	b.Run("compose", func(b *testing.B) { measure(b, "/compose", nil) })
}
