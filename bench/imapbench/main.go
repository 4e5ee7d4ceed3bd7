package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	mbox := flag.String("mbox", "", "mbox file to load")
	cmp := flag.Bool("compare-fts", false, "compare FTS5 layouts on the mbox and exit")
	flag.Parse()
	msgs, err := readMbox(*mbox, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *cmp {
		if err := compareFTS(msgs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
