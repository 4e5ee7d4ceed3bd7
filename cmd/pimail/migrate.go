package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/store/postgres"
	"pimail/internal/store/sqlite"
)

func init() {
	register("migrate", "copy a data directory's store into PostgreSQL, verified", cmdMigrate)
}

const migrateDoc = `Copies the SQLite store of a data directory into a new PostgreSQL store
and verifies the copy: the rows of every table, every mailbox's
UIDVALIDITY, UIDNEXT and HIGHESTMODSEQ, every message's UID, MODSEQ,
flags, keywords, internal date and content address, the expunge
tombstones, and the SHA-256 of every message as PostgreSQL keeps it.
Clients that synchronised before find the same UIDs and MODSEQs and need
no full resync.

It copies a consistent snapshot of the store (taken while the server may
run, hard links for the message files); mail that arrives after the
snapshot is not copied, so stop the server first for the real move
(docs/upgrading.md: "Moving to PostgreSQL"). The target database must
exist and hold no pimail domain; the schema is created. --dry-run takes
the snapshot, counts what would be copied, checks the target and writes
nothing to it. The data directory is left as it was: it is the way back.`

func cmdMigrate(args []string) error {
	fs := newFlags("migrate", "--to postgres://…", migrateDoc)
	data := fs.String("data", defaultDataDir(), "data directory whose store to copy")
	to := fs.String("to", "", "PostgreSQL URL of the new store, postgres://user:pass@host/db (required)")
	dry := fs.Bool("dry-run", false, "count and check only: write nothing to PostgreSQL")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	if !postgres.IsURL(*to) {
		return usagef("--to must be a postgres:// URL")
	}
	if _, err := os.Stat(filepath.Join(*data, "pimail.db")); err != nil {
		return fmt.Errorf("%s holds no pimail store: %w", *data, err)
	}
	ctx, cancel := signalContext()
	defer cancel()
	start := time.Now()

	// A snapshot of the (possibly running) store, migrated to the
	// current schema by opening it.
	st, err := openStore(*data)
	if err != nil {
		return err
	}
	snap := filepath.Join(st.Dir(), "backup", "migrate-"+time.Now().UTC().Format("20060102T150405Z"))
	_, err = st.Snapshot(ctx, snap, sqlite.SnapshotOptions{})
	st.Close()
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer os.RemoveAll(snap)
	counts, err := postgres.SourceCounts(ctx, snap)
	if err != nil {
		return err
	}
	fmt.Printf("snapshot of %s: %d domains, %d accounts, %d mailboxes, %d messages in %d blobs (%.1f MiB), %d queued, %d log rows (%.1fs)\n",
		*data, counts.Domains, counts.Accounts, counts.Mailboxes, counts.Messages, counts.Blobs,
		float64(counts.BlobBytes)/(1<<20), counts.Queue, counts.DeliveryLog, time.Since(start).Seconds())
	if *dry {
		if err := checkTargetEmpty(ctx, *to); err != nil {
			return err
		}
		fmt.Printf("dry run: %s is reachable and holds no pimail store; nothing was written\n", redactURL(*to))
		return nil
	}
	last := time.Now()
	err = postgres.CopyFromSQLite(ctx, *to, snap, func(done, total int64) {
		if time.Since(last) > 5*time.Second || done == total {
			last = time.Now()
			fmt.Printf("  %d of %d messages copied\n", done, total)
		}
	})
	if err != nil {
		return fmt.Errorf("copy into PostgreSQL (nothing was committed): %w", err)
	}
	fmt.Printf("copied in %.1fs; verifying\n", time.Since(start).Seconds())
	problems, err := postgres.VerifyCopy(ctx, *to, snap)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, p := range problems {
		fmt.Println("  DIFFERENCE:", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("the copy in %s differs from %s in %d ways: do not use it (drop the database and migrate again)", redactURL(*to), *data, len(problems))
	}
	fmt.Printf(`verified: every message, flag, UID and MODSEQ is identical (%.1fs in all)

Next: set database = %q in the configuration (or serve --database), start
pimail, and keep %s as it is: it is the way back (docs/upgrading.md).
`, time.Since(start).Seconds(), redactURL(*to), *data)
	return nil
}

// checkTargetEmpty connects to url and fails when it holds a pimail
// store with a domain; it writes nothing.
func checkTargetEmpty(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redactURL(url), err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('domains') IS NOT NULL").Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return nil
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM domains").Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%s already holds a pimail store with %d domains: migrate only into a new one", redactURL(url), n)
	}
	return nil
}
