package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"pimail/internal/store"
)

// Tests of LoginEvents.

func testLoginEvents(t *testing.T, s store.Store) {
	c := ctx(t)
	if evs, err := s.LoginsAfter(c, 0, 100); err != nil || len(evs) != 0 {
		t.Fatalf("empty log: %v, %v", evs, err)
	}
	t0 := time.UnixMilli(time.Now().UnixMilli())
	in := []store.LoginEvent{
		{Node: "a", Account: "bob@example.org", Source: "192.0.2.7", Time: t0},
		{Node: "a", Account: "Bob\x00\xff", Source: "2001:db8::/64", Time: t0.Add(time.Second)}, // any bytes
		{Node: "b", Account: "bob@example.org", Source: "192.0.2.9", Time: t0.Add(2 * time.Second), Success: true},
		{Node: "b", Account: "", Source: "?junk", Time: t0.Add(3 * time.Second)},
	}
	if err := s.RecordLogins(c, in[:2]); err != nil {
		t.Fatalf("RecordLogins: %v", err)
	}
	if err := s.RecordLogins(c, in[2:]); err != nil {
		t.Fatalf("RecordLogins: %v", err)
	}
	if err := s.RecordLogins(c, nil); err != nil {
		t.Fatalf("RecordLogins of nothing: %v", err)
	}
	all, err := s.LoginsAfter(c, 0, 100)
	if err != nil || len(all) != len(in) {
		t.Fatalf("LoginsAfter: %d events, %v; want %d", len(all), err, len(in))
	}
	for i, ev := range all {
		want := in[i]
		want.Seq = ev.Seq
		if i > 0 && ev.Seq <= all[i-1].Seq {
			t.Errorf("event %d: seq %d after %d", i, ev.Seq, all[i-1].Seq)
		}
		if !ev.Time.Equal(want.Time) {
			t.Errorf("event %d: time %v, want %v", i, ev.Time, want.Time)
		}
		ev.Time = want.Time
		if ev != want {
			t.Errorf("event %d: %+v, want %+v", i, ev, want)
		}
	}
	// The cursor and the limit.
	if evs, err := s.LoginsAfter(c, all[1].Seq, 1); err != nil || len(evs) != 1 || evs[0].Seq != all[2].Seq {
		t.Errorf("after the second, limit 1: %+v, %v", evs, err)
	}
	if evs, err := s.LoginsAfter(c, all[3].Seq, 10); err != nil || len(evs) != 0 {
		t.Errorf("after the last: %+v, %v", evs, err)
	}
	for _, bad := range []store.LoginEvent{
		{Source: "192.0.2.1", Time: t0},
		{Node: "a", Time: t0},
		{Node: "a", Source: "192.0.2.1", Account: strings.Repeat("x", store.MaxLoginEventField+1), Time: t0},
	} {
		if err := s.RecordLogins(c, []store.LoginEvent{in[0], bad}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecordLogins(%q, %q, %d-byte account): %v, want ErrInvalid", bad.Node, bad.Source, len(bad.Account), err)
		}
	}
	if evs, _ := s.LoginsAfter(c, all[3].Seq, 10); len(evs) != 0 {
		t.Errorf("a refused batch left %d events", len(evs))
	}

	// Pruning by age, failures and successes apart; a seq is never
	// given again, not even after the newest were pruned.
	if err := s.PruneLogins(c, t0.Add(1500*time.Millisecond), t0); err != nil {
		t.Fatalf("PruneLogins: %v", err)
	}
	if evs, err := s.LoginsAfter(c, 0, 100); err != nil || len(evs) != 2 || evs[0].Seq != all[2].Seq || evs[1].Seq != all[3].Seq {
		t.Errorf("after pruning failures before t0+1.5s: %+v, %v", evs, err)
	}
	if err := s.PruneLogins(c, t0.Add(time.Hour), t0.Add(time.Hour)); err != nil {
		t.Fatalf("PruneLogins: %v", err)
	}
	if evs, err := s.LoginsAfter(c, 0, 100); err != nil || len(evs) != 0 {
		t.Errorf("after pruning all: %+v, %v", evs, err)
	}
	if err := s.RecordLogins(c, in[:1]); err != nil {
		t.Fatal(err)
	}
	if evs, err := s.LoginsAfter(c, all[3].Seq, 10); err != nil || len(evs) != 1 {
		t.Errorf("an event recorded after pruning all: %+v, %v; want it above seq %d", evs, err, all[3].Seq)
	}

	// Concurrent writers: a reader following the log with a cursor
	// meanwhile sees every event once.
	const writers, batches = 4, 20
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				evs := []store.LoginEvent{
					{Node: fmt.Sprint("w", w), Account: fmt.Sprint(b), Source: "198.51.100.1", Time: t0},
					{Node: fmt.Sprint("w", w), Account: fmt.Sprint(b), Source: "198.51.100.2", Time: t0},
				}
				if err := s.RecordLogins(c, evs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	cursor := all[3].Seq
	seen := map[string]int{}
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		evs, err := s.LoginsAfter(c, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			seen[ev.Node+" "+ev.Account+" "+ev.Source]++
			cursor = ev.Seq
		}
		if finished && len(evs) == 0 {
			break
		}
	}
	if len(seen) != writers*batches*2+1 {
		t.Errorf("the reader saw %d distinct events, want %d", len(seen), writers*batches*2+1)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("event %q read %d times", k, n)
		}
	}
}
