package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"pimail/internal/config"
	"pimail/internal/store/sqlite"
	"pimail/internal/upgrade"
)

// defaultDataDir is localserve's data directory: $PIMAIL_DATA, else
// ./pimail-data.
func defaultDataDir() string {
	if d := os.Getenv("PIMAIL_DATA"); d != "" {
		return d
	}
	return "pimail-data"
}

// defaultConfig is the configuration file quickstart writes and the
// systemd unit runs with; $PIMAIL_CONFIG names another.
const defaultConfig = "/etc/pimail/pimail.toml"

// dataFlags are the --data, --database and --config flags of a command
// that works on an existing store.
type dataFlags struct{ data, database, config *string }

func addDataFlags(fs *flag.FlagSet) dataFlags {
	return dataFlags{
		data: fs.String("data", "", "data directory (default: $PIMAIL_DATA, else the configuration's data, else ./pimail-data)"),
		database: fs.String("database", "", "PostgreSQL URL of the store, postgres://… (default: $PIMAIL_DATABASE, "+
			"else the configuration's database; none: SQLite in the data directory)"),
		config: fs.String("config", "", "configuration file whose data directory and database to use (default: $PIMAIL_CONFIG, else "+defaultConfig+" if it exists)"),
	}
}

// loc returns where the store is. The data directory: --data, else
// $PIMAIL_DATA, else the data key of the configuration file (--config,
// $PIMAIL_CONFIG, or /etc/pimail/pimail.toml when it exists), else
// ./pimail-data; the database: --database, else $PIMAIL_DATABASE, else
// the configuration's database key. Without a database the data
// directory must hold a store already: only serve, localserve and
// quickstart create one, so that a wrong directory is an error, not a new
// empty store.
func (f dataFlags) loc() (storeLoc, error) {
	loc := storeLoc{dir: *f.data, database: *f.database}
	if loc.dir == "" {
		loc.dir = os.Getenv("PIMAIL_DATA")
	}
	if loc.database == "" {
		loc.database = os.Getenv("PIMAIL_DATABASE")
	}
	if loc.dir == "" || loc.database == "" {
		cfgFile := *f.config
		if cfgFile == "" {
			cfgFile = os.Getenv("PIMAIL_CONFIG")
		}
		if cfgFile == "" {
			if _, err := os.Stat(defaultConfig); err == nil {
				cfgFile = defaultConfig
			}
		}
		if cfgFile != "" {
			cfg, err := config.Load(cfgFile)
			if err != nil {
				return loc, err
			}
			if loc.dir == "" {
				loc.dir = cfg.Data
			}
			if loc.database == "" {
				loc.database = cfg.Database
			}
		}
	}
	if loc.dir == "" {
		loc.dir = "pimail-data"
	}
	if loc.database != "" {
		return loc, nil
	}
	return loc, requireDataDir(loc.dir)
}

// dir returns the data directory of an SQLite store (see loc); a store in
// PostgreSQL is an error.
func (f dataFlags) dir() (string, error) {
	loc, err := f.loc()
	if err == nil && loc.database != "" {
		err = usagef("the store is in PostgreSQL (%s): this command is for an SQLite data directory", redactURL(loc.database))
	}
	return loc.dir, err
}

// requireDataDir fails unless dir holds a pimail store.
func requireDataDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "pimail.db")); err != nil {
		abs, _ := filepath.Abs(dir)
		return fmt.Errorf("%s is not a pimail data directory (%v); give --data DIR or --config FILE "+
			"(pimail serve, localserve and quickstart create one, pimail init an empty one)", abs, errors.Unwrap(err))
	}
	return nil
}

// newFlags returns a FlagSet that prints its usage line and flags on --help.
func newFlags(name, argsUsage, doc string) *flag.FlagSet {
	fs := flag.NewFlagSet("pimail "+name, flag.ContinueOnError)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: pimail %s [flags] %s\n", name, argsUsage)
		if doc != "" {
			fmt.Fprintf(out, "\n%s\n", strings.TrimSpace(doc))
		}
		fmt.Fprintln(out, "\nflags:")
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may stand before, between or after the positional
// arguments ("domain add example.com --data d" works as well as the reverse),
// and returns the positional arguments. "--" ends flag parsing.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, err
			}
			return nil, usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// openStore opens the store of an existing data directory (see
// requireDataDir) for a short-lived admin command, which leaves blob
// collection to the server.
func openStore(dir string) (*sqlite.Store, error) {
	if err := requireDataDir(dir); err != nil {
		return nil, err
	}
	return createStore(dir)
}

// createStore opens the data directory's store, creating it when it does
// not exist: for serve, localserve, quickstart and init only.
func createStore(dir string) (*sqlite.Store, error) {
	return openData(dir, sqlite.Options{Logger: quietLogger(), NoCollect: true})
}

// openData opens the store of a data directory and moves in what older
// versions kept in files beside it (internal/upgrade), whichever command
// opens it first.
func openData(dir string, opts sqlite.Options) (*sqlite.Store, error) {
	st, err := sqlite.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open data directory %s: %w", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := upgrade.Run(ctx, st, st.Dir(), opts.Logger); err != nil {
		st.Close()
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	return st, nil
}

// quietLogger logs only warnings and errors, for the admin commands.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// newLogger builds the server's logger from the configured level and format.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
