package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pimail/internal/store"
)

// RunDeliveryLog runs the delivery log and administrator-flag tests, each
// on a fresh store from open.
func RunDeliveryLog(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"LogAndSearch", testLogSearch},
		{"LogPaging", testLogPaging},
		{"LogCounts", testLogCounts},
		{"LogPrune", testLogPrune},
		{"AccountDisabled", testAccountDisabled},
		{"Admins", testAdmins},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

func testLogSearch(t *testing.T, s store.Store) {
	c := ctx(t)
	now := time.Now()
	xss := `<script>alert(1)</script>@evil.example`
	entries := []store.DeliveryLogEntry{
		{Time: now.Add(-3 * time.Minute), MessageID: "<m1@example.net>", Direction: store.DirectionIn,
			From: "Alice@Example.NET", To: "bob@example.org", RemoteIP: "192.0.2.1", Subject: "hello",
			Result: store.ResultAccepted, Reason: "250 2.0.0 ok"},
		{Time: now.Add(-2 * time.Minute), Direction: store.DirectionIn, From: xss, To: "bob@example.org",
			RemoteIP: "198.51.100.7", Result: store.ResultRejected, Reason: "550 5.7.1 listed"},
		{Time: now.Add(-time.Minute), MessageID: "m2@example.org", QueueID: 42, Direction: store.DirectionOut,
			From: "bob@example.org", To: "carol@example.com", RemoteIP: "203.0.113.9",
			Result: store.ResultDelivered, Reason: "250 queued as X"},
		{MessageID: "m2@example.org", QueueID: 42, Direction: store.DirectionOut, From: "bob@example.org",
			To: "dave@example.com", Result: store.ResultDeferred, Reason: "451 try later"},
	}
	if err := s.LogDelivery(c, entries); err != nil {
		t.Fatalf("LogDelivery: %v", err)
	}
	if err := s.LogDelivery(c, nil); err != nil {
		t.Fatalf("LogDelivery(nil): %v", err)
	}
	all, err := s.SearchDeliveryLog(c, store.DeliveryLogQuery{})
	if err != nil || len(all) != 4 {
		t.Fatalf("SearchDeliveryLog(all) = %d rows, %v; want 4", len(all), err)
	}
	if all[0].ID <= all[1].ID || all[0].Result != store.ResultDeferred {
		t.Fatalf("not newest first: %+v", all)
	}
	if all[0].Time.IsZero() || time.Since(all[0].Time) > time.Minute {
		t.Fatalf("zero Time not set to now: %v", all[0].Time)
	}
	first := all[3]
	if first.MessageID != "m1@example.net" || first.From != "alice@example.net" || first.Subject != "hello" ||
		first.Direction != store.DirectionIn || first.RemoteIP != "192.0.2.1" || first.Reason != "250 2.0.0 ok" {
		t.Fatalf("stored row = %+v", first)
	}
	if all[2].From != xss {
		t.Fatalf("hostile sender not kept verbatim: %q", all[2].From)
	}
	cases := []struct {
		text string
		res  store.DeliveryResult
		want []string // reasons, newest first
	}{
		{"<m1@example.net>", "", []string{"250 2.0.0 ok"}},
		{"m1@example.net", "", []string{"250 2.0.0 ok"}},
		{"BOB@example.org", "", []string{"451 try later", "250 queued as X", "550 5.7.1 listed", "250 2.0.0 ok"}},
		{"carol@example.com", "", []string{"250 queued as X"}},
		{"42", "", []string{"451 try later", "250 queued as X"}},
		{"42", store.ResultDelivered, []string{"250 queued as X"}},
		{"198.51.100.7", "", []string{"550 5.7.1 listed"}},
		{"@example.com", "", []string{"451 try later", "250 queued as X"}},
		{"@evil.example", "", []string{"550 5.7.1 listed"}},
		{"@%", "", nil},
		{"nobody@example.org", "", nil},
		{"", store.ResultRejected, []string{"550 5.7.1 listed"}},
	}
	for _, tc := range cases {
		got, err := s.SearchDeliveryLog(c, store.DeliveryLogQuery{Text: tc.text, Result: tc.res})
		if err != nil {
			t.Fatalf("search %q: %v", tc.text, err)
		}
		var reasons []string
		for _, e := range got {
			reasons = append(reasons, e.Reason)
		}
		if !slices.Equal(reasons, tc.want) {
			t.Errorf("search %q %q = %q, want %q", tc.text, tc.res, reasons, tc.want)
		}
	}
	got, _ := s.SearchDeliveryLog(c, store.DeliveryLogQuery{Since: now.Add(-150 * time.Second), Until: now.Add(-30 * time.Second)})
	if len(got) != 2 {
		t.Errorf("time window = %d rows, want 2", len(got))
	}
}

func testLogPaging(t *testing.T, s store.Store) {
	c := ctx(t)
	var batch []store.DeliveryLogEntry
	for i := range 25 {
		batch = append(batch, store.DeliveryLogEntry{Direction: store.DirectionIn, To: "x@example.org",
			Result: store.ResultAccepted, Reason: fmt.Sprint(i)})
	}
	if err := s.LogDelivery(c, batch); err != nil {
		t.Fatal(err)
	}
	var seen []string
	before := int64(0)
	for page := 0; page < 10; page++ {
		got, err := s.SearchDeliveryLog(c, store.DeliveryLogQuery{Text: "x@example.org", Limit: 10, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			seen = append(seen, e.Reason)
		}
		if len(got) < 10 {
			break
		}
		before = got[len(got)-1].ID
	}
	if len(seen) != 25 || seen[0] != "24" || seen[24] != "0" {
		t.Fatalf("paged rows = %v", seen)
	}
}

func testLogCounts(t *testing.T, s store.Store) {
	c := ctx(t)
	now := time.Now().Truncate(time.Minute)
	var batch []store.DeliveryLogEntry
	for i := range 3 {
		batch = append(batch, store.DeliveryLogEntry{Time: now.Add(-10*time.Minute + time.Duration(i)*time.Second),
			Direction: store.DirectionIn, Result: store.ResultAccepted})
	}
	batch = append(batch,
		store.DeliveryLogEntry{Time: now.Add(-10 * time.Minute), Direction: store.DirectionIn, Result: store.ResultRejected},
		// A summary of 40 refusals counts 40.
		store.DeliveryLogEntry{Time: now.Add(-10 * time.Minute), Direction: store.DirectionIn, Result: store.ResultRejected,
			RemoteIP: "192.0.2.66", Reason: "flood", Count: 40},
		store.DeliveryLogEntry{Time: now.Add(-5 * time.Minute), Direction: store.DirectionOut, Result: store.ResultDelivered},
		store.DeliveryLogEntry{Time: now.Add(-2 * time.Hour), Direction: store.DirectionOut, Result: store.ResultDelivered})
	if err := s.LogDelivery(c, batch); err != nil {
		t.Fatal(err)
	}
	counts, err := s.DeliveryLogCounts(c, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		min int64
		d   store.DeliveryDirection
		r   store.DeliveryResult
	}
	got := map[key]int{}
	for _, x := range counts {
		got[key{x.Minute.Unix(), x.Direction, x.Result}] = x.Count
	}
	want := map[key]int{
		{now.Add(-10 * time.Minute).Unix(), store.DirectionIn, store.ResultAccepted}:  3,
		{now.Add(-10 * time.Minute).Unix(), store.DirectionIn, store.ResultRejected}:  41,
		{now.Add(-5 * time.Minute).Unix(), store.DirectionOut, store.ResultDelivered}: 1,
	}
	if len(got) != len(want) {
		t.Fatalf("counts = %+v, want %+v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("counts = %+v, want %+v", got, want)
		}
	}
	found, err := s.SearchDeliveryLog(c, store.DeliveryLogQuery{Text: "192.0.2.66"})
	if err != nil || len(found) != 1 || found[0].Count != 40 || found[0].Reason != "flood" {
		t.Fatalf("the summary entry: %+v, %v", found, err)
	}
	found, err = s.SearchDeliveryLog(c, store.DeliveryLogQuery{Result: store.ResultDelivered, Limit: 1})
	if err != nil || len(found) != 1 || found[0].Count != 1 {
		t.Fatalf("an entry of one recipient: %+v, %v", found, err)
	}
}

func testLogPrune(t *testing.T, s store.Store) {
	c := ctx(t)
	now := time.Now()
	var batch []store.DeliveryLogEntry
	for i := range 12 {
		age := time.Duration(i) * 24 * time.Hour
		batch = append(batch, store.DeliveryLogEntry{Time: now.Add(-age), Direction: store.DirectionIn,
			Result: store.ResultAccepted, Reason: fmt.Sprint(i)})
	}
	if err := s.LogDelivery(c, batch); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneDeliveryLog(c, now.Add(-(7*24-1)*time.Hour))
	if err != nil || n != 5 {
		t.Fatalf("PruneDeliveryLog = %d, %v; want 5", n, err)
	}
	left, _ := s.SearchDeliveryLog(c, store.DeliveryLogQuery{})
	if len(left) != 7 {
		t.Fatalf("%d rows left, want 7", len(left))
	}
}

func testAccountDisabled(t *testing.T, s store.Store) {
	c := ctx(t)
	setup(t, s, 1)
	v0, _ := s.DirectoryVersion(c)
	if err := s.SetAccountDisabled(c, "USER0@example.org", true); err != nil {
		t.Fatalf("SetAccountDisabled: %v", err)
	}
	a, _ := s.Account(c, "user0@example.org")
	if !a.Disabled {
		t.Fatal("account not disabled")
	}
	if v1, _ := s.DirectoryVersion(c); v1 == v0 {
		t.Fatal("directory version did not move")
	}
	if err := s.SetAccountDisabled(c, "user0@example.org", false); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Account(c, "user0@example.org"); a.Disabled {
		t.Fatal("account still disabled")
	}
	err := s.SetAccountDisabled(c, "nobody@example.org", true)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetAccountDisabled(unknown) = %v, want ErrNotFound", err)
	}
}

func testAdmins(t *testing.T, s store.Store) {
	c := ctx(t)
	if got, err := s.Admins(c); err != nil || len(got) != 0 {
		t.Fatalf("Admins on empty store = %v, %v", got, err)
	}
	f := setup(t, s, 3)
	isAdmin := func(i int) bool {
		ok, err := s.IsAdmin(c, f.accounts[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !isAdmin(0) || isAdmin(1) || isAdmin(2) {
		t.Fatal("the oldest account is not the only implicit administrator")
	}
	if err := s.SetAdmin(c, "user2@example.org", true); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Admins(c)
	if !slices.Equal(got, []string{"user0@example.org", "user2@example.org"}) {
		t.Fatalf("Admins = %v", got)
	}
	if err := s.SetAdmin(c, "user0@example.org", false); err != nil {
		t.Fatal(err)
	}
	if isAdmin(0) || !isAdmin(2) {
		t.Fatal("unflagging user0 failed")
	}
	err := s.SetAdmin(c, "user2@example.org", false)
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unflagging the last administrator = %v, want ErrInvalid", err)
	}
	if err := s.SetAdmin(c, "nobody@example.org", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetAdmin(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.RemoveAccount(c, "user2@example.org"); err != nil {
		t.Fatal(err)
	}
	// No flagged administrator left: the oldest account is one again.
	if got, _ := s.Admins(c); !slices.Equal(got, []string{"user0@example.org"}) {
		t.Fatalf("Admins after removing the last flagged one = %v", got)
	}
}
