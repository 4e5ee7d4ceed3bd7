// Command pgserver runs a PostgreSQL server for the benchmark scripts
// (internal/pgtest: initdb in a temporary directory, a unix socket), makes
// -n databases, prints one URL per line, then "ready", and stops the
// server and removes its directory when it gets SIGINT or SIGTERM.
//
//	go run ./bench/pgserver -n 2
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"pimail/internal/pgtest"
)

func main() {
	n := flag.Int("n", 1, "databases to create")
	var opts pgtest.Options
	flag.Func("set", "a postgresql.conf line, KEY = VALUE (repeatable), e.g. \"log_statement = 'all'\"", func(v string) error {
		opts.Settings = append(opts.Settings, v)
		return nil
	})
	flag.Parse()
	srv, err := pgtest.Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgserver:", err)
		os.Exit(1)
	}
	defer srv.Stop()
	for range *n {
		url, err := srv.CreateDatabase(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgserver:", err)
			return
		}
		fmt.Println(url)
	}
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
