package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store"
)

// The delivery log: one row per recipient, written in batches by
// internal/deliverylog (relaxed: the loss of the last rows to a crash of
// the database server loses no mail).

// logText makes a string from the network fit a text column: invalid
// UTF-8 and NUL become U+FFFD, and it is cut to at most n bytes without
// splitting a character. Searches clean their text the same way.
func logText(s string, n int) string {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	return store.Clip(s, n)
}

// LogDelivery appends entries in one transaction.
func (s *Store) LogDelivery(ctx context.Context, entries []store.DeliveryLogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	now := time.Now()
	n := len(entries)
	times, queues, counts := make([]int64, n), make([]int64, n), make([]int32, n)
	msgIDs, dirs, froms, tos, ips, subjects, results, reasons := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, e := range entries {
		t := e.Time
		if t.IsZero() {
			t = now
		}
		times[i], queues[i], counts[i] = t.UnixMilli(), e.QueueID, int32(max(e.Count, 1))
		msgIDs[i] = logText(store.NormMessageID(e.MessageID), store.MaxLogField)
		dirs[i] = logText(string(e.Direction), store.MaxLogField)
		froms[i] = logText(strings.ToLower(strings.TrimSpace(e.From)), store.MaxLogField)
		tos[i] = logText(strings.ToLower(strings.TrimSpace(e.To)), store.MaxLogField)
		ips[i] = logText(strings.TrimSpace(e.RemoteIP), store.MaxLogField)
		subjects[i] = logText(e.Subject, store.MaxLogField)
		results[i] = logText(string(e.Result), store.MaxLogField)
		reasons[i] = logText(e.Reason, store.MaxLogReason)
	}
	return s.writeRelaxed(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO delivery_log (time, message_id, queue_id, direction, from_addr, to_addr, remote_ip, subject, result, reason, n)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
				$8::text[], $9::text[], $10::text[], $11::integer[])`,
			times, msgIDs, queues, dirs, froms, tos, ips, subjects, results, reasons, counts)
		if err != nil {
			return fmt.Errorf("log delivery: %w", err)
		}
		return nil
	})
}

// SearchDeliveryLog answers newest first. Each form of Text is an
// equality on indexed columns; only the "@domain" form scans (within the
// time bounds).
func (s *Store) SearchDeliveryLog(ctx context.Context, q store.DeliveryLogQuery) ([]store.DeliveryLogEntry, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var where []string
	var p params
	if text := strings.TrimSpace(q.Text); text != "" {
		where = append(where, logTextCond(text, &p))
	}
	if q.Result != "" {
		where = append(where, "result = "+p.add(string(q.Result)))
	}
	if !q.Since.IsZero() {
		where = append(where, "time >= "+p.add(q.Since.UnixMilli()))
	}
	if !q.Until.IsZero() {
		where = append(where, "time < "+p.add(q.Until.UnixMilli()))
	}
	if q.Before > 0 {
		where = append(where, "id < "+p.add(q.Before))
	}
	sqlq := "SELECT id, time, message_id, queue_id, direction, from_addr, to_addr, remote_ip, subject, result, reason, n FROM delivery_log"
	if len(where) > 0 {
		sqlq += " WHERE " + strings.Join(where, " AND ")
	}
	sqlq += " ORDER BY id DESC LIMIT " + p.add(limit)
	rows, _ := s.pool.Query(ctx, sqlq, p...)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.DeliveryLogEntry, error) {
		var e store.DeliveryLogEntry
		var ms int64
		var dir, res string
		err := r.Scan(&e.ID, &ms, &e.MessageID, &e.QueueID, &dir, &e.From, &e.To, &e.RemoteIP, &e.Subject, &res, &e.Reason, &e.Count)
		e.Time = time.UnixMilli(ms)
		e.Direction, e.Result = store.DeliveryDirection(dir), store.DeliveryResult(res)
		return e, err
	})
	if err != nil {
		return nil, storeErr(fmt.Errorf("search delivery log: %w", err))
	}
	return out, nil
}

// logTextCond turns the search text into a condition: a whole message
// id, an address, a domain ("@example.org"), a queue id or an IP.
func logTextCond(text string, p *params) string {
	low := logText(strings.ToLower(text), store.MaxLogField)
	msgID := func(id string) string {
		return "(message_id = " + p.add(logText(store.NormMessageID(id), store.MaxLogField)) + " AND message_id <> '')"
	}
	switch {
	case strings.HasPrefix(low, "@") && len(low) > 1:
		pat := p.add("%" + store.LikeEscaper.Replace(low))
		return "(from_addr LIKE " + pat + " OR to_addr LIKE " + pat + ")"
	case strings.Contains(low, "@") && !strings.HasPrefix(text, "<"):
		a := p.add(low)
		return "(from_addr = " + a + " OR to_addr = " + a + " OR " + msgID(text) + ")"
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil && n > 0 {
		return "((queue_id = " + p.add(n) + " AND queue_id <> 0) OR " + msgID(text) + ")"
	}
	return "(" + msgID(text) + " OR remote_ip = " + p.add(low) + ")"
}

// DeliveryLogCounts groups the rows since the given time by minute.
func (s *Store) DeliveryLogCounts(ctx context.Context, since time.Time) ([]store.DeliveryLogCount, error) {
	rows, _ := s.pool.Query(ctx, `SELECT time / 60000 AS m, direction, result, sum(n) FROM delivery_log
		WHERE time >= $1 GROUP BY m, direction, result ORDER BY m, direction, result`, since.UnixMilli())
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.DeliveryLogCount, error) {
		var c store.DeliveryLogCount
		var m int64
		var dir, res string
		err := r.Scan(&m, &dir, &res, &c.Count)
		c.Minute = time.UnixMilli(m * 60000)
		c.Direction, c.Result = store.DeliveryDirection(dir), store.DeliveryResult(res)
		return c, err
	})
	if err != nil {
		return nil, storeErr(fmt.Errorf("count delivery log: %w", err))
	}
	return out, nil
}

// pruneChunk bounds the rows one prune transaction deletes.
const pruneChunk = 5000

// PruneDeliveryLog deletes rows older than before, a chunk per
// transaction, and returns how many.
func (s *Store) PruneDeliveryLog(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for range 1_000_000 { // bounded: at most 5e9 rows
		var n int64
		err := s.write(ctx, func(w *wtx) error {
			tag, err := w.exec(`DELETE FROM delivery_log WHERE id IN
				(SELECT id FROM delivery_log WHERE time < $1 ORDER BY time, id LIMIT $2)`, before.UnixMilli(), pruneChunk)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < pruneChunk {
			break
		}
	}
	return total, nil
}
