package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// VerifyReport is the outcome of VerifyDir.
type VerifyReport struct {
	Blobs     int   // blob rows checked
	BlobBytes int64 // bytes of message files read and hashed
	MailRows  int   // mail rows
	QueueRows int   // outbound queue entries
	// Pending counts blob rows no one references any more: the collector
	// removes them with their files; not damage.
	Pending int
	// Orphans are message files without a row (relative to the data
	// directory): crash leftovers or deliveries not yet committed. The
	// collector removes them after a grace period; not damage.
	Orphans []string
	// Problems describe damage: a missing or altered message file, a
	// reference count that does not match the rows, a failed database
	// integrity check.
	Problems []string
}

// Damaged reports whether any problem was found.
func (r VerifyReport) Damaged() bool { return len(r.Problems) > 0 }

// maxProblems bounds the problems listed; the count goes on.
const maxProblems = 1000

func (r *VerifyReport) problem(format string, a ...any) {
	if len(r.Problems) == maxProblems {
		r.Problems = append(r.Problems, "… more problems not listed")
	}
	if len(r.Problems) > maxProblems {
		return
	}
	r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
}

type verifyBlob struct {
	id       int64
	sha      string
	size     int64
	refcount int64
}

// VerifyDir checks a data directory (a live one, with the server running,
// or a backup) without changing it: the database's integrity and foreign
// keys; every message file against its SHA-256 name and recorded size;
// every blob's reference count against the mail and queue rows pointing at
// it; and it lists files without a row. Rows are read in one read
// transaction; a file found missing is looked up again afterwards, so a
// blob collected by a running server meanwhile is not reported as damage.
func VerifyDir(ctx context.Context, dir string) (VerifyReport, error) {
	var rep VerifyReport
	dbPath := filepath.Join(dir, "pimail.db")
	if _, err := os.Stat(dbPath); err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	db, err := sql.Open("sqlite", dbPath+"?_pragma=query_only(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		return rep, fmt.Errorf("verify: open database: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	if err := checkIntegrity(ctx, db, &rep); err != nil {
		return rep, err
	}
	blobs, err := readBlobRows(ctx, db, &rep)
	if err != nil {
		return rep, err
	}

	blobDir := filepath.Join(dir, "blobs")
	var inline bool // schema 7: messages kept in blob_data
	if err := db.QueryRowContext(ctx, "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'blob_data'").Scan(&inline); err != nil {
		return rep, fmt.Errorf("verify: look up blob_data: %w", err)
	}
	known := make(map[string]bool, len(blobs))
	var missing []verifyBlob
	for _, b := range blobs {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("verify: %w", err)
		}
		known[b.sha] = true
		n, sum, err := hashBlob(ctx, db, inline, b.id, filepath.Join(blobDir, b.sha[:2], b.sha))
		switch {
		case errors.Is(err, os.ErrNotExist):
			if b.refcount > 0 {
				missing = append(missing, b)
			}
		case err != nil:
			rep.problem("blob %d (%s): %v", b.id, b.sha, err)
		case sum != b.sha:
			rep.problem("blob %d: file %s hashes to %s: its content is damaged", b.id, b.sha, sum)
		case n != b.size:
			rep.problem("blob %d (%s): file has %d bytes, the database says %d", b.id, b.sha, n, b.size)
		}
		rep.BlobBytes += n
	}
	// A running server may have collected some of them since the read.
	for _, b := range missing {
		var rc int64
		err := db.QueryRowContext(ctx, "SELECT refcount FROM blobs WHERE id = ? AND sha256 = ?", b.id, b.sha).Scan(&rc)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && rc <= 0) {
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("verify: look up blob %d again: %w", b.id, err)
		}
		rep.problem("blob %d (%s, %d references): message file is missing", b.id, b.sha, rc)
	}
	orphans, err := findOrphans(blobDir, known)
	if err != nil {
		return rep, err
	}
	rep.Orphans = orphans
	return rep, nil
}

// checkIntegrity runs SQLite's integrity and foreign key checks.
func checkIntegrity(ctx context.Context, db *sql.DB, rep *VerifyReport) error {
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check(100)")
	if err != nil {
		return fmt.Errorf("verify: integrity check: %w", err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return fmt.Errorf("verify: integrity check: %w", err)
		}
		if line != "ok" {
			rep.problem("database: %s", line)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("verify: integrity check: %w", err)
	}
	rows, err = db.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return fmt.Errorf("verify: foreign key check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fkid int64
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return fmt.Errorf("verify: foreign key check: %w", err)
		}
		rep.problem("database: a row of %s (rowid %v) points at a missing row of %s", table, rowid.Int64, parent)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("verify: foreign key check: %w", err)
	}
	return nil
}

// readBlobRows reads the blob rows and the reference counts from mail and
// queue rows in one read transaction, and compares them.
func readBlobRows(ctx context.Context, db *sql.DB, rep *VerifyReport) ([]verifyBlob, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("verify: begin read: %w", err)
	}
	defer tx.Rollback()
	var blobs []verifyBlob
	q := "SELECT id, sha256, size, refcount FROM blobs ORDER BY id"
	var releases bool // schema 8: references expunges dropped, not yet subtracted (collect.go)
	if err := tx.QueryRowContext(ctx, "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'blob_release'").Scan(&releases); err != nil {
		return nil, fmt.Errorf("verify: look up blob_release: %w", err)
	}
	if releases {
		q = `SELECT b.id, b.sha256, b.size, b.refcount - coalesce(r.n, 0) FROM blobs b
			LEFT JOIN (SELECT blob_id, count(*) AS n FROM blob_release GROUP BY blob_id) r ON r.blob_id = b.id ORDER BY b.id`
	}
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("verify: list blobs: %w", err)
	}
	for rows.Next() {
		var b verifyBlob
		if err := rows.Scan(&b.id, &b.sha, &b.size, &b.refcount); err != nil {
			rows.Close()
			return nil, fmt.Errorf("verify: list blobs: %w", err)
		}
		if len(b.sha) != 64 || !isHex(b.sha) {
			rep.problem("blob %d: bad content address %q", b.id, b.sha)
			continue
		}
		blobs = append(blobs, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("verify: list blobs: %w", err)
	}
	refs := map[int64]int64{}
	for _, q := range []struct {
		table string
		n     *int
	}{{"mail", &rep.MailRows}, {"queue", &rep.QueueRows}} {
		rows, err := tx.QueryContext(ctx, "SELECT blob_id, count(*) FROM "+q.table+" GROUP BY blob_id")
		if err != nil {
			return nil, fmt.Errorf("verify: count %s rows: %w", q.table, err)
		}
		for rows.Next() {
			var id, n int64
			if err := rows.Scan(&id, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("verify: count %s rows: %w", q.table, err)
			}
			refs[id] += n
			*q.n += int(n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("verify: count %s rows: %w", q.table, err)
		}
	}
	rep.Blobs = len(blobs)
	for _, b := range blobs {
		n := refs[b.id]
		delete(refs, b.id)
		if n != b.refcount {
			rep.problem("blob %d (%s): reference count %d, but %d mail and queue rows point at it", b.id, b.sha, b.refcount, n)
		}
		if b.refcount <= 0 {
			rep.Pending++
		}
	}
	ids := make([]int64, 0, len(refs))
	for id := range refs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		rep.problem("%d mail or queue rows point at blob %d, which has no row", refs[id], id)
	}
	return blobs, nil
}

// hashBlob returns the size and SHA-256 in hex of blob id's bytes: kept
// in the database when inline and blob_data has them, else in the file at
// path.
func hashBlob(ctx context.Context, db *sql.DB, inline bool, id int64, path string) (int64, string, error) {
	if inline {
		var raw []byte
		err := db.QueryRowContext(ctx, "SELECT raw FROM blob_data WHERE blob_id = ?", id).Scan(&raw)
		if err == nil {
			sum := sha256.Sum256(raw)
			return int64(len(raw)), hex.EncodeToString(sum[:]), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, "", fmt.Errorf("read blob_data: %w", err)
		}
	}
	return hashFile(path)
}

// hashFile returns a file's size and SHA-256 in hex.
func hashFile(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return n, "", fmt.Errorf("read: %w", err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// findOrphans lists message files (blobs/<hh>/<sha>) without a row.
func findOrphans(blobDir string, known map[string]bool) ([]string, error) {
	subs, err := os.ReadDir(blobDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verify: list %s: %w", blobDir, err)
	}
	var out []string
	for _, sub := range subs {
		hh := sub.Name()
		if !sub.IsDir() || len(hh) != 2 || !isHex(hh) {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(blobDir, hh))
		if err != nil {
			return nil, fmt.Errorf("verify: list %s: %w", hh, err)
		}
		for _, e := range ents {
			if !known[e.Name()] {
				out = append(out, filepath.Join("blobs", hh, e.Name()))
			}
		}
	}
	return out, nil
}
