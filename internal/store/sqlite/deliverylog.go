package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"pimail/internal/store"
)

// maxLogBatch bounds the entries of one LogDelivery write.
const maxLogBatch = 1000

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
		// The entries of one event (a message to several recipients) share
		// an envelope row; entries of concurrent sessions may interleave.
		type envRows struct{ id, n int64 }
		envs := make(map[logEnv]envRows, len(entries))
		for _, e := range entries {
			t := e.Time
			if t.IsZero() {
				t = now
			}
			k := logEnv{
				time:      t.UnixMilli(),
				messageID: store.Clip(store.NormMessageID(e.MessageID), store.MaxLogField),
				queueID:   e.QueueID,
				direction: string(e.Direction),
				from:      store.Clip(strings.ToLower(strings.TrimSpace(e.From)), store.MaxLogField),
				remoteIP:  store.Clip(strings.TrimSpace(e.RemoteIP), store.MaxLogField),
				subject:   store.Clip(e.Subject, store.MaxLogField),
			}
			env, ok := envs[k]
			if !ok {
				res, err := w.exec(`INSERT INTO delivery_env (time, message_id, queue_id, direction, from_addr, remote_ip, subject)
					VALUES (?, ?, ?, ?, ?, ?, ?)`, k.time, k.messageID, k.queueID, k.direction, k.from, k.remoteIP, k.subject)
				if err != nil {
					return fmt.Errorf("insert delivery log envelope: %w", err)
				}
				if env.id, err = res.LastInsertId(); err != nil {
					return fmt.Errorf("insert delivery log envelope: %w", err)
				}
			}
			envs[k] = envRows{env.id, env.n + 1}
			if _, err := w.exec(`INSERT INTO delivery_rcpt (id, to_addr, result, reason, n) VALUES (?, ?, ?, ?, ?)`,
				env.id*rcptsPerEnv+env.n,
				store.Clip(strings.ToLower(strings.TrimSpace(e.To)), store.MaxLogField),
				string(e.Result),
				store.Clip(e.Reason, store.MaxLogReason), max(e.Count, 1)); err != nil {
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

// rcptsPerEnv is the number of recipient rows an envelope can have: a
// recipient row's id is its envelope's id times this, plus its place
// (schema step 10). The SQL below writes it as a shift by 10 bits.
const rcptsPerEnv = 1 << 10

// A write's entries all fit into one envelope (this does not compile
// otherwise).
const _ = uint(rcptsPerEnv - maxLogBatch)

// logEnv is a delivery_env row: what the entries of one event share.
type logEnv struct {
	time                                          int64
	messageID, direction, from, remoteIP, subject string
	queueID                                       int64
}

// logSelect reads entries: a recipient row (r) with its envelope (e).
const logSelect = `SELECT r.id, e.time, e.message_id, e.queue_id, e.direction, e.from_addr, r.to_addr, e.remote_ip,
	e.subject, r.result, r.reason, r.n FROM delivery_rcpt r JOIN delivery_env e ON e.id = r.id >> 10`

// rcptRange selects the recipient rows r2 of envelope e2: a range of the
// primary key. envRcpts joins them to their envelopes.
const (
	rcptRange = "r2.id BETWEEN e2.id << 10 AND (e2.id << 10) + 1023"
	envRcpts  = "delivery_env e2 JOIN delivery_rcpt r2 ON " + rcptRange
)

// SearchDeliveryLog answers newest first. Each form of Text is an equality
// on indexed columns, so a search costs index lookups even on a long log;
// only the "@domain" form scans (within the time bounds).
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
		where = append(where, "r.result = ?")
		args = append(args, string(q.Result))
	}
	if !q.Since.IsZero() {
		where = append(where, "e.time >= ?")
		args = append(args, q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		where = append(where, "e.time < ?")
		args = append(args, q.Until.UnixMilli())
	}
	if q.Before > 0 {
		where = append(where, "r.id < ?")
		args = append(args, q.Before)
	}
	sqlq := logSelect
	if len(where) > 0 {
		sqlq += " WHERE " + strings.Join(where, " AND ")
	}
	sqlq += " ORDER BY r.id DESC LIMIT ?"
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
		if err := rows.Scan(&e.ID, &ms, &e.MessageID, &e.QueueID, &dir, &e.From, &e.To, &e.RemoteIP, &e.Subject, &res, &e.Reason, &e.Count); err != nil {
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

// logTextCond turns the search text into a condition on indexed columns:
// the set of entry ids that the indexes of either table find (envIn for
// conditions on the envelope). The Message-ID and queue id indexes leave
// out empty values, which the conditions repeat so that SQLite uses them.
func logTextCond(text string) (string, []any) {
	const envIn = "r.id IN (SELECT r2.id FROM " + envRcpts + " WHERE "
	const msgID = "(e2.message_id = ? AND e2.message_id <> '')"
	low := strings.ToLower(text)
	switch {
	case strings.HasPrefix(low, "@") && len(low) > 1:
		// The domain part of an address: LIKE with its wildcards escaped.
		pat := "%" + store.LikeEscaper.Replace(low)
		return `(e.from_addr LIKE ? ESCAPE '\' OR r.to_addr LIKE ? ESCAPE '\')`, []any{pat, pat}
	case strings.Contains(low, "@") && !strings.HasPrefix(text, "<"):
		// An address, or a message id without brackets (they contain @ too).
		return envIn + "e2.from_addr = ? OR " + msgID + " UNION ALL SELECT id FROM delivery_rcpt WHERE to_addr = ?)",
			[]any{low, store.NormMessageID(text), low}
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil && n > 0 {
		return envIn + "(e2.queue_id = ? AND e2.queue_id <> 0) OR " + msgID + ")", []any{n, text}
	}
	return envIn + msgID + " OR e2.remote_ip = ?)", []any{store.NormMessageID(text), low}
}

// DeliveryLogCounts groups the rows since the given time by minute.
func (s *Store) DeliveryLogCounts(ctx context.Context, since time.Time) ([]store.DeliveryLogCount, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT e2.time / 60000 AS m, e2.direction, r2.result, sum(r2.n)
		FROM `+envRcpts+` WHERE e2.time >= ? GROUP BY m, e2.direction, r2.result ORDER BY m`, since.UnixMilli())
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

// pruneChunk bounds the envelopes one prune write deletes (with their
// recipient rows, most often one or two each), so that pruning a long log
// never holds the writer (and deliveries) for long.
const pruneChunk = 2000

// PruneDeliveryLog deletes entries older than before, a chunk of envelopes
// (and their recipient rows) per write, and returns the entries deleted.
func (s *Store) PruneDeliveryLog(ctx context.Context, before time.Time) (int64, error) {
	// Both statements select the same oldest envelopes: (time, id) is the
	// order of the time index, and the first statement changes no envelope.
	const oldest = "(SELECT id FROM delivery_env WHERE time < ?1 ORDER BY time, id LIMIT ?2)"
	const rcpts = "(SELECT r2.id FROM " + oldest + " e2 JOIN delivery_rcpt r2 ON " + rcptRange + ")"
	var total int64
	for i := 0; i < 1_000_000; i++ { // bounded: at most 2e9 envelopes
		var rows, envs int64
		err := s.write(ctx, func(w *wtx) error {
			res, err := w.exec("DELETE FROM delivery_rcpt WHERE id IN "+rcpts, before.UnixMilli(), pruneChunk)
			if err != nil {
				return fmt.Errorf("prune delivery log: %w", err)
			}
			if rows, err = res.RowsAffected(); err != nil {
				return fmt.Errorf("prune delivery log: %w", err)
			}
			if res, err = w.exec("DELETE FROM delivery_env WHERE id IN "+oldest, before.UnixMilli(), pruneChunk); err != nil {
				return fmt.Errorf("prune delivery log: %w", err)
			}
			envs, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("sqlite store: %w", err)
		}
		total += rows
		if envs < pruneChunk {
			break
		}
	}
	return total, nil
}
