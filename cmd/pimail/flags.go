package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"pimail/internal/store/sqlite"
	"pimail/internal/upgrade"
)

// defaultDataDir is where commands look for the data directory when no
// --data is given: $PIMAIL_DATA, else ./pimail-data (the localserve default).
func defaultDataDir() string {
	if d := os.Getenv("PIMAIL_DATA"); d != "" {
		return d
	}
	return "pimail-data"
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

// openStore opens the data directory's store. Short-lived admin commands
// leave blob collection to the server (admin is true).
func openStore(dir string, admin bool) (*sqlite.Store, error) {
	return openData(dir, sqlite.Options{Logger: quietLogger(), NoCollect: admin})
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
