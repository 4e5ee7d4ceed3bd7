package deliverylog

import (
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

// TestFloodSummarized: beyond the burst, a client's refusals become one
// summary entry per window, whose Count keeps the dashboard's numbers
// exact; an IPv6 client counts by its /64; other results and other
// clients are not held; the next window starts afresh.
func TestFloodSummarized(t *testing.T) {
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := New(st, quiet(), Options{FlushInterval: time.Hour, FloodBurst: 3, FloodWindow: time.Hour})
	refuse := func(ip, to string) {
		l.Log(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultRejected, RemoteIP: ip,
			From: "spam@example.net", To: to, Reason: "550 5.1.1 no such user"})
	}
	for i := range 1000 {
		refuse("192.0.2.1", "user"+string(rune('a'+i%26))+"@example.org")
	}
	refuse("192.0.2.2", "x@example.org")
	refuse("192.0.2.2", "y@example.org")
	for _, ip := range []string{"2001:db8::1", "2001:db8::2", "2001:db8::3", "2001:db8::4", "2001:db8::5"} {
		refuse(ip, "v6@example.org")
	}
	l.Log(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultAccepted, RemoteIP: "192.0.2.1"})
	refuse("", "no-address@example.org") // never held: no client to count
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	all, err := st.SearchDeliveryLog(c, store.DeliveryLogQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// 3 + 2 + 3 refusals one by one, the accepted one, the one without an
	// address, and two summaries (192.0.2.1's 997, the /64's 2).
	if len(all) != 12 {
		t.Fatalf("%d entries, want 12: %+v", len(all), all)
	}
	summaries := map[string]store.DeliveryLogEntry{}
	for _, e := range all {
		if e.Count > 1 {
			summaries[e.RemoteIP] = e
		}
	}
	s1, s6 := summaries["192.0.2.1"], summaries["2001:db8::5"]
	if s1.Count != 997 || !strings.Contains(s1.Reason, "997 more refusals from 192.0.2.1/32") || !strings.Contains(s1.Reason, "550 5.1.1 no such user") {
		t.Fatalf("IPv4 summary: %+v", s1)
	}
	if s6.Count != 2 || !strings.Contains(s6.Reason, "2001:db8::/64") || len(summaries) != 2 {
		t.Fatalf("IPv6 summary: %+v (all summaries %+v)", s6, summaries)
	}
	counts, err := st.DeliveryLogCounts(c, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for _, x := range counts {
		if x.Result == store.ResultRejected {
			rejected += x.Count
		}
	}
	if rejected != 1000+2+5+1 {
		t.Fatalf("the counts say %d refusals, want 1008", rejected)
	}
}

// TestFloodWindowResets: a new window logs a client's first refusals one
// by one again.
func TestFloodWindowResets(t *testing.T) {
	rec := &recordStore{}
	l := New(rec, quiet(), Options{FlushInterval: time.Hour, FloodBurst: 2, FloodWindow: 50 * time.Millisecond})
	refuse := func() {
		l.Log(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultRejected, RemoteIP: "198.51.100.9"})
	}
	for range 5 {
		refuse()
	}
	time.Sleep(300 * time.Millisecond) // the window ends: the summary of 3
	refuse()
	refuse()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var single, summarized int
	for _, e := range rec.entries {
		if e.Count > 1 {
			summarized += e.Count
		} else {
			single++
		}
	}
	// 2 + 2 one by one and 3 summarized; more one by one if a window
	// ended among the first five.
	if single < 4 || single+summarized != 7 {
		t.Fatalf("%d logged one by one and %d summarized, want 4 and 3: %+v", single, summarized, rec.entries)
	}
}
