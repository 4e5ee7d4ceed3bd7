package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"pimail/internal/store"
)

// Bounds on what one delivery log row keeps: the log is for reading by an
// administrator, and every field may come from a hostile peer.
const (
	maxLogField  = 512  // addresses, message ids, IPs, subjects
	maxLogReason = 2000 // SMTP replies and verdicts
	maxLogBatch  = 1000 // entries per LogDelivery write
)

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// LogDelivery appends entries in one write request, so that it shares the
// writer's group commit with concurrent deliveries. It is of the relaxed
// class (writer.go): a power failure can take back the last second of log
// rows, never a message.
func (s *Store) LogDelivery(ctx context.Context, entries []store.DeliveryLogEntry) error {
	for len(entries) > 0 {
		n := min(len(entries), maxLogBatch)
		if err := s.logBatch(ctx, entries[:n]); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

func (s *Store) logBatch(ctx context.Context, entries []store.DeliveryLogEntry) error {
	now := time.Now()
	err := s.writeRelaxed(ctx, func(w *wtx) error {
		for _, e := range entries {
			t := e.Time
			if t.IsZero() {
				t = now
			}
			if _, err := w.exec(`INSERT INTO delivery_log (time, message_id, queue_id, direction, from_addr, to_addr, remote_ip, subject, result, reason)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				t.UnixMilli(),
				clip(normMessageID(e.MessageID), maxLogField),
				e.QueueID,
				string(e.Direction),
				clip(strings.ToLower(strings.TrimSpace(e.From)), maxLogField),
				clip(strings.ToLower(strings.TrimSpace(e.To)), maxLogField),
				clip(strings.TrimSpace(e.RemoteIP), maxLogField),
				clip(e.Subject, maxLogField),
				string(e.Result),
				clip(e.Reason, maxLogReason)); err != nil {
				return fmt.Errorf("insert delivery log row: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite store: log delivery: %w", err)
	}
	return nil
}

// normMessageID strips spaces and the angle brackets of a Message-ID.
func normMessageID(id string) string {
	id = strings.TrimSpace(id)
	id = strings.TrimPrefix(id, "<")
	return strings.TrimSuffix(id, ">")
}

const logCols = "id, time, message_id, queue_id, direction, from_addr, to_addr, remote_ip, subject, result, reason"

// SearchDeliveryLog answers newest first. Each form of Text is an equality
// on an indexed column, so a search costs an index lookup even on a long
// log; only the "@domain" form scans (within the time bounds).
func (s *Store) SearchDeliveryLog(ctx context.Context, q store.DeliveryLogQuery) ([]store.DeliveryLogEntry, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var where []string
	var args []any
	if text := strings.TrimSpace(q.Text); text != "" {
		cond, cargs := logTextCond(text)
		where = append(where, cond)
		args = append(args, cargs...)
	}
	if q.Result != "" {
		where = append(where, "result = ?")
		args = append(args, string(q.Result))
	}
	if !q.Since.IsZero() {
		where = append(where, "time >= ?")
		args = append(args, q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		where = append(where, "time < ?")
		args = append(args, q.Until.UnixMilli())
	}
	if q.Before > 0 {
		where = append(where, "id < ?")
		args = append(args, q.Before)
	}
	sqlq := "SELECT " + logCols + " FROM delivery_log"
	if len(where) > 0 {
		sqlq += " WHERE " + strings.Join(where, " AND ")
	}
	sqlq += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := s.rdb.QueryContext(ctx, sqlq, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: search delivery log: %w", err)
	}
	defer rows.Close()
	var out []store.DeliveryLogEntry
	for rows.Next() {
		var e store.DeliveryLogEntry
		var ms int64
		var dir, res string
		if err := rows.Scan(&e.ID, &ms, &e.MessageID, &e.QueueID, &dir, &e.From, &e.To, &e.RemoteIP, &e.Subject, &res, &e.Reason); err != nil {
			return nil, fmt.Errorf("sqlite store: search delivery log: %w", err)
		}
		e.Time = time.UnixMilli(ms)
		e.Direction, e.Result = store.DeliveryDirection(dir), store.DeliveryResult(res)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: search delivery log: %w", err)
	}
	return out, nil
}

// logTextCond turns the search text into a condition on indexed columns.
func logTextCond(text string) (string, []any) {
	low := strings.ToLower(text)
	switch {
	case strings.HasPrefix(low, "@") && len(low) > 1:
		// The domain part of an address: LIKE with its wildcards escaped.
		pat := "%" + likeEscaper.Replace(low)
		return `(from_addr LIKE ? ESCAPE '\' OR to_addr LIKE ? ESCAPE '\')`, []any{pat, pat}
	case strings.Contains(low, "@") && !strings.HasPrefix(text, "<"):
		// An address, or a message id without brackets (they contain @ too).
		id := normMessageID(text)
		return "(from_addr = ? OR to_addr = ? OR message_id = ?)", []any{low, low, id}
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil && n > 0 {
		return "(queue_id = ? OR message_id = ?)", []any{n, text}
	}
	id := normMessageID(text)
	return "(message_id = ? OR remote_ip = ?)", []any{id, low}
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// DeliveryLogCounts groups the rows since the given time by minute.
func (s *Store) DeliveryLogCounts(ctx context.Context, since time.Time) ([]store.DeliveryLogCount, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT time / 60000 AS m, direction, result, count(*)
		FROM delivery_log WHERE time >= ? GROUP BY m, direction, result ORDER BY m`, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sqlite store: count delivery log: %w", err)
	}
	defer rows.Close()
	var out []store.DeliveryLogCount
	for rows.Next() {
		var c store.DeliveryLogCount
		var m int64
		var dir, res string
		if err := rows.Scan(&m, &dir, &res, &c.Count); err != nil {
			return nil, fmt.Errorf("sqlite store: count delivery log: %w", err)
		}
		c.Minute = time.UnixMilli(m * 60000)
		c.Direction, c.Result = store.DeliveryDirection(dir), store.DeliveryResult(res)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: count delivery log: %w", err)
	}
	return out, nil
}

// pruneChunk bounds the rows one prune write deletes, so that pruning a
// long log never holds the writer (and deliveries) for long.
const pruneChunk = 5000

// PruneDeliveryLog deletes rows older than before, a chunk per write.
func (s *Store) PruneDeliveryLog(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for i := 0; i < 1_000_000; i++ { // bounded: at most 5e9 rows
		var n int64
		err := s.write(ctx, func(w *wtx) error {
			res, err := w.exec(`DELETE FROM delivery_log WHERE id IN
				(SELECT id FROM delivery_log WHERE time < ? ORDER BY time LIMIT ?)`, before.UnixMilli(), pruneChunk)
			if err != nil {
				return fmt.Errorf("prune delivery log: %w", err)
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("sqlite store: %w", err)
		}
		total += n
		if n < pruneChunk {
			break
		}
	}
	return total, nil
}
