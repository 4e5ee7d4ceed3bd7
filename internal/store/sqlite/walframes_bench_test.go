package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pimail/internal/deliverylog"
	"pimail/internal/store"
)

// BenchmarkDeliverFrames shows what a delivery writes, B-tree by B-tree:
// b.N messages of 8 KB from 10 goroutines, each to R of 20 accounts and
// logged once per recipient through the delivery log (as the delivery
// pipeline does), with no checkpoint, so that the WAL keeps every page
// each commit wrote. It reports the WAL's KB per message and the frames
// (4 KB pages) per message of the message's own trees (blob*), the
// mailbox trees (mail*), the delivery log (delivery_*) and the rest;
// -v logs every tree. Each page is written again, once per checkpoint
// interval, when the checkpoint copies it into the database file.
//
//	go test ./internal/store/sqlite -run XXX -bench DeliverFrames -benchtime 200x -v
func BenchmarkDeliverFrames(b *testing.B) {
	for _, r := range []int{1, 5, 15} {
		b.Run(fmt.Sprintf("rcpts=%d", r), func(b *testing.B) { benchDeliverFrames(b, r) })
	}
}

func benchDeliverFrames(b *testing.B, rcpts int) {
	q, m, back := checkpointQuiet, checkpointMax, walBackstop
	checkpointQuiet, checkpointMax, walBackstop = time.Hour, time.Hour, 1<<30
	b.Cleanup(func() { checkpointQuiet, checkpointMax, walBackstop = q, m, back })
	dir := b.TempDir()
	s, err := Open(dir, testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		b.Fatal(err)
	}
	var accounts []store.Account
	for i := range 20 {
		a, err := s.AddAccount(ctx, fmt.Sprintf("user%d@example.org", i), "h")
		if err != nil {
			b.Fatal(err)
		}
		accounts = append(accounts, a)
	}
	dlog := deliverylog.New(s, slog.New(slog.DiscardHandler), deliverylog.Options{})
	defer dlog.Close()
	wal := filepath.Join(dir, "pimail.db-wal")
	start := walSize(b, wal)
	b.ResetTimer()
	inParallel(b, 10, func(i int) error {
		d := store.Delivery{Raw: benchMsg(int64(i))}
		var to []string
		for k := range rcpts {
			a := accounts[(i*7+k)%len(accounts)]
			d.Recipients = append(d.Recipients, store.Recipient{AccountID: a.ID})
			to = append(to, a.Address)
		}
		if _, err := s.Deliver(ctx, d); err != nil {
			return err
		}
		dlog.LogEach(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultAccepted,
			MessageID: fmt.Sprintf("bench%d@x", i), Subject: fmt.Sprintf("bench %d", i),
			From: "a@example.net", RemoteIP: "192.0.2.1", Reason: "250 queued"}, to)
		return nil
	})
	if err := dlog.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	frames, pageSize := walFrames(b, wal, start)
	names := map[uint32]string{}
	rows, err := s.rdb.QueryContext(ctx, "SELECT name, pageno FROM dbstat")
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var name string
		var pg uint32
		if err := rows.Scan(&name, &pg); err != nil {
			b.Fatal(err)
		}
		names[pg] = name
	}
	rows.Close()
	byTree := map[string]int{}
	total := 0
	for _, pg := range frames {
		name := names[pg]
		if name == "" {
			name = "(free)"
		}
		byTree[name]++
		total++
	}
	groups := map[string]int{}
	for name, n := range byTree {
		g := "other"
		for _, p := range []string{"blob", "mail", "delivery_"} {
			if strings.HasPrefix(name, p) || strings.HasPrefix(name, "sqlite_autoindex_"+p) {
				g = strings.TrimSuffix(p, "_")
				break
			}
		}
		groups[g] += n
	}
	n := float64(b.N)
	b.ReportMetric(float64(total*(pageSize+24))/1024/n, "KB/msg")
	for _, g := range []string{"blob", "mail", "delivery", "other"} {
		b.ReportMetric(float64(groups[g])/n, g+"-frames/msg")
	}
	trees := slices.SortedFunc(func(yield func(string) bool) {
		for k := range byTree {
			if !yield(k) {
				return
			}
		}
	}, func(x, y string) int { return byTree[y] - byTree[x] })
	for _, t := range trees {
		if b.N == 1 {
			break // the framework's first, sizing run
		}
		b.Logf("%-28s %6.2f frames/msg", t, float64(byTree[t])/n)
	}
}

func walSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// walFrames returns the page number of every WAL frame from byte offset
// from on (the WAL format: a 32-byte header with the page size at offset
// 8, then frames of a 24-byte header, whose first 4 bytes are the page
// number, and the page).
func walFrames(b *testing.B, path string, from int64) ([]uint32, int) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		b.Fatal(err)
	}
	pageSize := int(binary.BigEndian.Uint32(data[8:12]))
	fs := int64(24 + pageSize)
	off := int64(32)
	if from > off {
		off += (from - off + fs - 1) / fs * fs
	}
	var pages []uint32
	for ; off+fs <= int64(len(data)); off += fs {
		pages = append(pages, binary.BigEndian.Uint32(data[off:off+4]))
	}
	return pages, pageSize
}
