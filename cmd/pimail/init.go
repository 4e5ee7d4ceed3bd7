package main

import "fmt"

func init() {
	register("init", "create an empty data directory (serve, localserve and quickstart create theirs)", cmdInit)
}

// cmdInit creates the store, so that domains and accounts can be set up
// before the server's first start; the other admin commands refuse a
// directory without one.
func cmdInit(args []string) error {
	fs := newFlags("init", "", `Creates an empty data directory: the database with its schema and the
message store, as "pimail serve" does on its first start. Use it to add
domains and accounts before the first start; every other admin command
refuses a directory that does not hold a store.`)
	data := fs.String("data", defaultDataDir(), "data directory to create")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	if requireDataDir(*data) == nil {
		return fmt.Errorf("%s holds a pimail store already", *data)
	}
	st, err := createStore(*data)
	if err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	fmt.Printf("created the data directory %s\n", *data)
	return nil
}
