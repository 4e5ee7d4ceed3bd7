package metrics

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

func TestTextFormat(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounter("test_events_total", "Events.\nSecond line with \\ backslash.")
	cv := r.NewCounterVec("test_conns_total", "Connections.", "protocol", "tls")
	g := r.NewGauge("test_queue", "Queue size.")
	h := r.NewHistogram("test_latency_seconds", "Latency.", []float64{0.1, 1, 10})
	r.NewGaugeFunc("test_func", "A function.", func() float64 { return math.Inf(1) })
	r.NewCounterVec("test_unused_total", "Never used.", "x")

	c.Add(3)
	c.Inc()
	cv.With("imap", "yes").Inc()
	cv.With("smtp", `we"ird\`+"\n").Add(2)
	cv.With("imap", "yes").Inc()
	g.Set(5)
	g.Dec()
	g.Add(0.5)
	for _, v := range []float64{0.05, 0.1, 0.5, 3, 100} {
		h.Observe(v)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP test_conns_total Connections.
# TYPE test_conns_total counter
test_conns_total{protocol="imap",tls="yes"} 2
test_conns_total{protocol="smtp",tls="we\"ird\\\n"} 2
# HELP test_events_total Events.\nSecond line with \\ backslash.
# TYPE test_events_total counter
test_events_total 4
# HELP test_func A function.
# TYPE test_func gauge
test_func +Inf
# HELP test_latency_seconds Latency.
# TYPE test_latency_seconds histogram
test_latency_seconds_bucket{le="0.1"} 2
test_latency_seconds_bucket{le="1"} 3
test_latency_seconds_bucket{le="10"} 4
test_latency_seconds_bucket{le="+Inf"} 5
test_latency_seconds_sum 103.65
test_latency_seconds_count 5
# HELP test_queue Queue size.
# TYPE test_queue gauge
test_queue 4.5
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}

	// The output parses back.
	samples, err := ParseText(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if v := Sum(samples, "test_conns_total", map[string]string{"tls": "we\"ird\\\n"}); v != 2 {
		t.Errorf("parsed escaped label: %v", v)
	}
	if m := ByLabel(samples, "test_conns_total", "protocol"); m["imap"] != 2 || m["smtp"] != 2 {
		t.Errorf("ByLabel = %v", m)
	}
	if v := Sum(samples, "test_func", nil); !math.IsInf(v, 1) {
		t.Errorf("+Inf parsed as %v", v)
	}
}

func TestRegistryMisuse(t *testing.T) {
	r := NewRegistry()
	r.NewCounter("a_total", "")
	for name, fn := range map[string]func(){
		"duplicate":        func() { r.NewGauge("a_total", "") },
		"bad name":         func() { r.NewCounter("1abc", "") },
		"bad label":        func() { r.NewCounterVec("b_total", "", "bad-label") },
		"le label":         func() { r.NewHistogramVec("c", "", nil, "le") },
		"unsorted buckets": func() { r.NewHistogram("d", "", []float64{1, 0.5}) },
		"wrong arity":      func() { r.NewCounterVec("e_total", "", "x").With("1", "2") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
}

func TestSeriesLimit(t *testing.T) {
	r := NewRegistry()
	cv := r.NewCounterVec("ips_total", "", "ip")
	for i := range MaxSeries + 50 {
		cv.With(strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String()).Inc()
	}
	var b strings.Builder
	r.WriteText(&b)
	samples, err := ParseText(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != MaxSeries+1 {
		t.Fatalf("%d series, want %d", len(samples), MaxSeries+1)
	}
	if v := Sum(samples, "ips_total", map[string]string{"ip": overflowValue}); v != 50 {
		t.Errorf("overflow series = %v, want 50", v)
	}
}

func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	cv := r.NewCounterVec("n_total", "", "k")
	g := r.NewGauge("g", "")
	h := r.NewHistogram("h", "", nil)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				cv.With([]string{"a", "b"}[i%2]).Inc()
				g.Add(1)
				h.Observe(float64(w))
			}
		}()
		wg.Add(1)
		go func() { defer wg.Done(); r.WriteText(io.Discard) }()
	}
	wg.Wait()
	if a, b := cv.With("a").Value(), cv.With("b").Value(); a+b != 8000 {
		t.Errorf("counts %d+%d", a, b)
	}
	if g.Value() != 8000 || h.Count() != 8000 {
		t.Errorf("gauge %v, histogram %d", g.Value(), h.Count())
	}
}

func TestQuantile(t *testing.T) {
	r := NewRegistry()
	h := r.NewHistogram("lat", "", []float64{1, 2, 4})
	for range 50 {
		h.Observe(0.5)
	}
	for range 40 {
		h.Observe(1.5)
	}
	for range 10 {
		h.Observe(100)
	}
	var b strings.Builder
	r.WriteText(&b)
	s, _ := ParseText(strings.NewReader(b.String()))
	if q := Quantile(s, "lat", 0.5); q != 1 {
		t.Errorf("p50 = %v, want 1", q)
	}
	if q := Quantile(s, "lat", 0.7); math.Abs(q-1.5) > 1e-9 {
		t.Errorf("p70 = %v, want 1.5", q)
	}
	if q := Quantile(s, "lat", 0.99); q != 4 {
		t.Errorf("p99 = %v, want 4 (highest finite bound)", q)
	}
	if q := Quantile(s, "missing", 0.5); !math.IsNaN(q) {
		t.Errorf("missing histogram: %v", q)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{"novalue", `x{a="1" 2`, `x{a=1} 2`, "x abc", "x 1 2 3"} {
		if _, err := ParseText(strings.NewReader(in)); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}

type fakeStats struct{ calls int }

func (f *fakeStats) Stats(context.Context) (store.Stats, error) {
	f.calls++
	return store.Stats{Accounts: 3, Messages: 10, Blobs: 7, BlobBytes: 1234}, nil
}

// TestHandler scrapes the Default registry over loopback HTTP: process
// metrics, server metrics and the store gauges.
func TestHandler(t *testing.T) {
	fs := &fakeStats{}
	WatchStore(fs, time.Hour)
	Connections.With(ProtoIMAP).Inc()
	MessagesRejected.With(RejectUnknownRecipient).Add(3)
	DeliveryLatency.Observe(0.004)
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	var samples []Sample
	for range 2 {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Content-Type") != ContentType {
			t.Errorf("content type %q", resp.Header.Get("Content-Type"))
		}
		samples, err = ParseText(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if fs.calls != 1 {
		t.Errorf("store stats read %d times in two scrapes, want 1 (cached)", fs.calls)
	}
	for name, check := range map[string]func(float64) bool{
		"process_resident_memory_bytes":          func(v float64) bool { return v > 1<<20 },
		"process_open_fds":                       func(v float64) bool { return v >= 3 },
		"go_goroutines":                          func(v float64) bool { return v >= 2 },
		"process_start_time_seconds":             func(v float64) bool { return v > 1.6e9 },
		"go_heap_goal_bytes":                     func(v float64) bool { return v > 0 },
		"pimail_store_blob_bytes":                func(v float64) bool { return v == 1234 },
		"pimail_connections_total":               func(v float64) bool { return v >= 1 },
		"pimail_messages_rejected_total":         func(v float64) bool { return v >= 3 },
		"pimail_delivery_duration_seconds_count": func(v float64) bool { return v >= 1 },
	} {
		if v := Sum(samples, name, nil); !check(v) {
			t.Errorf("%s = %v", name, v)
		}
	}
	resp, err := srv.Client().Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestPeakRSS(t *testing.T) {
	buf := make([]byte, 16<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	r := residentBytes()
	if p := PeakRSS(); p < 16<<20 || p < r {
		t.Errorf("peak RSS %d, resident %d after touching 16 MiB", p, r)
	}
	_ = buf[len(buf)-1]
}
