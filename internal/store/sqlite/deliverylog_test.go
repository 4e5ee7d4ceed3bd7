package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/storetest"
)

func TestDeliveryLogSuite(t *testing.T) {
	storetest.RunDeliveryLog(t, func(t *testing.T) store.Store {
		s, err := Open(t.TempDir(), testOptions())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

// TestDeliveryLogEnvelopes: the entries of one event share one envelope row
// even when another session's entries come between them, and each entry
// reads back with the shared fields.
func TestDeliveryLogEnvelopes(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Now()
	msg := store.DeliveryLogEntry{Time: now, MessageID: "<m@x>", Direction: store.DirectionIn, From: "a@x",
		RemoteIP: "192.0.2.1", Subject: "hi", Result: store.ResultAccepted}
	other := store.DeliveryLogEntry{Time: now, Direction: store.DirectionIn, From: "spam@y", RemoteIP: "198.51.100.1",
		Result: store.ResultRejected, Reason: "550 5.1.1 no such user"}
	var batch []store.DeliveryLogEntry
	for i := range 15 {
		e := msg
		e.To = fmt.Sprintf("u%d@x", i)
		batch = append(batch, e)
		if i%5 == 0 {
			o := other
			o.To = fmt.Sprintf("nobody%d@x", i)
			batch = append(batch, o)
		}
	}
	if err := s.LogDelivery(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var envs, rcpts int
	if err := s.rdb.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM delivery_env), (SELECT count(*) FROM delivery_rcpt)").
		Scan(&envs, &rcpts); err != nil || envs != 2 || rcpts != 18 {
		t.Fatalf("envelopes, recipient rows = %d, %d, %v; want 2, 18", envs, rcpts, err)
	}
	for _, q := range []struct {
		text string
		want int
	}{{"m@x", 15}, {"u7@x", 1}, {"a@x", 15}, {"198.51.100.1", 3}, {"nobody5@x", 1}} {
		got, err := s.SearchDeliveryLog(ctx, store.DeliveryLogQuery{Text: q.text})
		if err != nil || len(got) != q.want {
			t.Fatalf("search %q = %d entries, %v; want %d", q.text, len(got), err, q.want)
		}
		for _, e := range got {
			if e.Result == store.ResultAccepted && (e.MessageID != "m@x" || e.Subject != "hi" || e.From != "a@x" || e.RemoteIP != "192.0.2.1") {
				t.Fatalf("search %q: entry %+v lost its envelope", q.text, e)
			}
		}
	}
	if n, err := s.PruneDeliveryLog(ctx, now.Add(time.Second)); err != nil || n != 18 {
		t.Fatalf("PruneDeliveryLog = %d, %v; want 18", n, err)
	}
	if err := s.rdb.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM delivery_env), (SELECT count(*) FROM delivery_rcpt)").
		Scan(&envs, &rcpts); err != nil || envs != 0 || rcpts != 0 {
		t.Fatalf("after pruning: envelopes, recipient rows = %d, %d, %v; want none", envs, rcpts, err)
	}
}

// TestDeliveryLogPlans: every form of search text but "@domain" reads
// indexes, not whole tables.
func TestDeliveryLogPlans(t *testing.T) {
	s := openTest(t)
	for _, text := range []string{"bob@example.org", "<m1@example.net>", "42", "192.0.2.1"} {
		cond, args := logTextCond(text)
		q := "EXPLAIN QUERY PLAN " + logSelect + " WHERE " + cond + " ORDER BY r.id DESC LIMIT 100"
		rows, err := s.rdb.Query(q, args...)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") {
				t.Errorf("search %q scans a table: %q", text, plan)
			}
		}
	}
}

// TestDeliveryLogMigration: rows of the one-table log (schema step 9) keep
// their order (each is the first entry of an envelope with the row's id)
// and read back the same after the upgrade, and new entries come after
// them.
func TestDeliveryLogMigration(t *testing.T) {
	dir := t.TempDir()
	orig := migrations
	t.Cleanup(func() { migrations = orig })
	migrations = orig[:9]
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i, r := range [][]any{
		{now - 2000, "m1@x", 0, "in", "a@x", "u1@x", "192.0.2.1", "one", "accepted", "250 ok"},
		{now - 1000, "", 0, "in", "spam@y", "nobody@x", "198.51.100.1", "", "rejected", "550 no"},
		{now, "m2@x", 42, "out", "u1@x", "c@z", "203.0.113.9", "two", "delivered", "250 queued"},
	} {
		if _, err := s.wdb.Exec(`INSERT INTO delivery_log (id, time, message_id, queue_id, direction, from_addr,
			to_addr, remote_ip, subject, result, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append([]any{10 * (i + 1)}, r...)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	migrations = orig
	s, err = Open(dir, testOptions())
	if err != nil {
		t.Fatalf("Open after upgrade: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.LogDelivery(ctx, []store.DeliveryLogEntry{{Direction: store.DirectionIn, To: "u1@x",
		Result: store.ResultAccepted, Reason: "new"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SearchDeliveryLog(ctx, store.DeliveryLogQuery{})
	if err != nil || len(got) != 4 {
		t.Fatalf("after upgrade: %d entries, %v; want 4", len(got), err)
	}
	if got[0].Reason != "new" || got[0].ID <= got[1].ID {
		t.Fatalf("new entry %+v; want an id above the old ones", got[0])
	}
	old := got[1:]
	if old[0].ID != 30*rcptsPerEnv || old[0].QueueID != 42 || old[0].To != "c@z" || old[0].Subject != "two" || old[0].Direction != "out" ||
		old[1].ID != 20*rcptsPerEnv || old[1].From != "spam@y" || old[1].RemoteIP != "198.51.100.1" || old[1].Result != "rejected" ||
		old[2].ID != 10*rcptsPerEnv || old[2].MessageID != "m1@x" || old[2].Reason != "250 ok" || old[2].Time.UnixMilli() != now-2000 {
		t.Fatalf("old entries after upgrade: %+v", old)
	}
	if got, _ := s.SearchDeliveryLog(ctx, store.DeliveryLogQuery{Text: "u1@x"}); len(got) != 3 {
		t.Fatalf("search u1@x after upgrade = %d entries, want 3", len(got))
	}
}
