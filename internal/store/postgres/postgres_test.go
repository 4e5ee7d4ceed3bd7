package postgres

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"pimail/internal/pgtest"
	"pimail/internal/store"
	"pimail/internal/store/storetest"
)

// server is the PostgreSQL of this test binary (TestMain).
var server *pgtest.Server

func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(m, &server, pgtest.Options{}))
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var (
	dbOnce sync.Once
	dbURL  string
	dbErr  error
)

// newDatabase returns the URL of the test binary's database, emptied:
// every table truncated and the schema's first rows put back. Emptying
// one database takes a fraction of what creating one does (tests run one
// after the other, each closing its stores before the next starts).
func newDatabase(t testing.TB) string {
	t.Helper()
	srv := pgtest.Need(t, server)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbOnce.Do(func() {
		if dbURL, dbErr = srv.CreateDatabase(ctx); dbErr != nil {
			return
		}
		var s *Store
		if s, dbErr = Open(dbURL, Options{Logger: quietLogger(), Admin: true}); dbErr == nil {
			s.Close()
		}
	})
	if dbErr != nil {
		t.Fatal(dbErr)
	}
	if err := emptyDatabase(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	return dbURL
}

// emptyDatabase deletes every row of the schema's tables but
// pimail_schema's, restarts their sequences and puts back the rows the
// first migration inserts. DELETE with the foreign keys' triggers off
// (session_replication_role) takes a fraction of what TRUNCATE does,
// which gives every table new files.
func emptyDatabase(ctx context.Context, url string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	rows, _ := c.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'pimail_schema'")
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var sql strings.Builder
	sql.WriteString("SET session_replication_role = replica; ")
	for _, t := range tables {
		sql.WriteString("DELETE FROM " + t + "; ")
	}
	sql.WriteString("SELECT setval(format('%I.%I', schemaname, sequencename), 1, false) FROM pg_sequences WHERE schemaname = current_schema(); " +
		"SET session_replication_role = DEFAULT; " +
		"INSERT INTO meta (key, value) VALUES ('directory_version', 1), ('uidvalidity', 0)")
	_, err = c.Exec(ctx, sql.String())
	return err
}

func testOptions() Options {
	return Options{Logger: quietLogger(), CollectInterval: 100 * time.Millisecond}
}

// openTest opens a store on a new database, closed with the test.
func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(newDatabase(t), testOptions())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func open(t *testing.T) store.Store {
	s, err := Open(newDatabase(t), testOptions())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestSuite(t *testing.T) {
	storetest.Run(t, open, func(t *testing.T, closed store.Store) store.Store {
		s, err := Open(closed.(*Store).URL(), testOptions())
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		return s
	})
}

func TestQuota(t *testing.T)       { storetest.RunQuota(t, open) }
func TestSieve(t *testing.T)       { storetest.RunSieve(t, open) }
func TestDeliveryLog(t *testing.T) { storetest.RunDeliveryLog(t, open) }

// TestSearch runs the search tests; the index is part of every write, so
// there is nothing to wait for.
func TestSearch(t *testing.T) { storetest.RunSearch(t, open, nil) }
