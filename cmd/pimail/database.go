package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"pimail/internal/config"
	"pimail/internal/store"
	"pimail/internal/store/postgres"
	"pimail/internal/store/sqlite"
	"pimail/internal/upgrade"
)

// storeLoc is where a command finds the store: the data directory and,
// when the store is in PostgreSQL, its URL (the data directory then holds
// only files: TLS certificates, import journals).
type storeLoc struct{ dir, database string }

// redactURL hides the password of a database URL, for printing.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// openAdminStore opens the store for a short-lived admin command, which
// leaves blob collection to the servers.
func openAdminStore(loc storeLoc) (store.Store, error) {
	if loc.database == "" {
		return openStore(loc.dir)
	}
	return openPostgres(loc.dir, loc.database, postgres.Options{Logger: quietLogger(), Admin: true})
}

// openServerStore opens the store the configuration names for serve.
func openServerStore(cfg config.Config, logger *slog.Logger) (store.Store, error) {
	if cfg.Database == "" {
		return openData(cfg.Data, sqlite.Options{Logger: logger})
	}
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	return openPostgres(cfg.Data, cfg.Database, postgres.Options{Logger: logger, Feed: cfg.DatabaseFeed})
}

// openPostgres opens a PostgreSQL store and moves in what an older
// version kept in files in the data directory, as openData does.
func openPostgres(dir, url string, opts postgres.Options) (*postgres.Store, error) {
	if !postgres.IsURL(url) {
		return nil, usagef("--database %q is not a postgres:// URL", url)
	}
	st, err := postgres.Open(url, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := upgrade.Run(ctx, st, dir, opts.Logger); err != nil {
		st.Close()
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	return st, nil
}
