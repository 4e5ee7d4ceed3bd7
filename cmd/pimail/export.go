package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"pimail/internal/mailexport"
)

func init() {
	register("export", "export an account's mail as mbox files or a Maildir", cmdExport)
}

const exportDoc = `
--format mbox:    with --mailbox, OUT is one mboxrd file ("-" for standard
                  output); without, OUT is a directory with one NAME.mbox per
                  mailbox ("Lists/go" → OUT/Lists/go.mbox).
--format maildir: OUT is a new Maildir++ tree (INBOX at the top, .Sub.Folder
                  for the others), flags in the file names.
Existing files are never overwritten. ` + "`pimail import`" + ` reads both back.`

func cmdExport(args []string) error {
	fs := newFlags("export", "--account ADDRESS --format mbox|maildir [--mailbox NAME] OUT", exportDoc)
	data := addDataFlags(fs)
	account := fs.String("account", "", "address of the account to export (required)")
	format := fs.String("format", "mbox", "mbox or maildir")
	mailbox := fs.String("mailbox", "", "export only this mailbox")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *account == "" {
		return usagef("--account is required")
	}
	if len(pos) != 1 {
		return usagef("want exactly one output path")
	}
	out := pos[0]
	if *format != "mbox" && *format != "maildir" {
		return usagef("unknown format %q (want mbox or maildir)", *format)
	}
	loc, err := data.loc()
	if err != nil {
		return err
	}
	st, err := openAdminStore(loc)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ex, err := mailexport.New(ctx, st, *account, quietLogger())
	if err != nil {
		return err
	}
	mbs, err := ex.Mailboxes(ctx, *mailbox)
	if err != nil {
		return err
	}
	start := time.Now()
	switch {
	case *format == "maildir":
		err = ex.ExportMaildir(ctx, out, mbs)
	case *mailbox != "":
		err = ex.ExportMboxFile(ctx, out, mbs[0])
	default:
		err = ex.ExportMboxDir(ctx, out, mbs)
	}
	if err != nil {
		return err
	}
	s := ex.Stats()
	if out != "-" {
		fmt.Printf("exported %d messages (%.1f MiB) from %d mailboxes in %v\n",
			s.Messages, float64(s.Bytes)/(1<<20), s.Mailboxes, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
