package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"pimail/internal/backup"
	"pimail/internal/store/sqlite"
)

func init() {
	register("backup", "take a consistent backup while the server runs", cmdBackup)
	register("restore", "restore a backup into a new data directory", cmdRestore)
	register("verify", "check a data directory's messages, references and database", cmdVerify)
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func cmdBackup(args []string) error {
	fs := newFlags("backup", "OUTDIR", `Writes a consistent backup of the data directory into OUTDIR (new or
empty), while the server keeps running: the database copied in one read
transaction (it holds everything but the message files: accounts, mail,
the queue, preferences, sessions, spam models, keys and secrets), every
message file it references (hard-linked when OUTDIR is on the same file
system, else copied and checked), TLS files and import journals. The
full-text index is not copied; it is rebuilt at start. See
docs/upgrading.md.`)
	data := addDataFlags(fs)
	copyFiles := fs.Bool("copy", false, "copy message files even where hard links are possible")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one OUTDIR")
	}
	dir, err := data.dir()
	if err != nil {
		return err
	}
	st, err := openStore(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := signalContext()
	defer cancel()
	m, err := backup.Run(ctx, st, pos[0], backup.Options{Copy: *copyFiles})
	if err != nil {
		return err
	}
	how := "copied and checked"
	if m.Linked {
		how = "hard-linked"
	}
	fmt.Printf("backup of %s written to %s in %s\n", m.Source, pos[0], m.Duration)
	fmt.Printf("  database      %d bytes\n", m.DBBytes)
	fmt.Printf("  messages      %d contents, %d bytes (those kept as files %s)\n", m.Blobs, m.BlobBytes, how)
	fmt.Printf("  other files   %d (TLS, import journals)\n", m.AuxFiles)
	if m.Attempts > 1 {
		fmt.Printf("  attempts      %d (messages were expunged while copying; locked: %v)\n", m.Attempts, m.Locked)
	}
	return nil
}

func cmdRestore(args []string) error {
	fs := newFlags("restore", "BACKUPDIR DATADIR", `Copies a backup made by "pimail backup" into DATADIR, which must be new
or empty; every message file is checked against its SHA-256 name on the
way. Start the server on DATADIR afterwards (stop it first if it runs on
the old directory); it rebuilds the full-text index.`)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want BACKUPDIR and DATADIR")
	}
	ctx, cancel := signalContext()
	defer cancel()
	rs, err := backup.Restore(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	fmt.Printf("restored the backup of %s taken %s into %s\n", rs.Manifest.Source, rs.Manifest.Created.Format("2006-01-02 15:04:05 MST"), pos[1])
	fmt.Printf("  messages      %d files, %d bytes (checked)\n", rs.Blobs, rs.BlobBytes)
	fmt.Printf("  other files   %d\n", rs.AuxFiles)
	fmt.Printf("check it with: pimail verify --data %s\n", pos[1])
	return nil
}

func cmdVerify(args []string) error {
	fs := newFlags("verify", "", `Checks a data directory (live or a backup) without changing it: the
database's integrity, every message file against its SHA-256 name and
size, every reference count against the rows. Files without a row
(orphans) are listed; the server removes them. Exit status 1 on damage.`)
	data := addDataFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	dir, err := data.dir()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	rep, err := sqlite.VerifyDir(ctx, dir)
	if err != nil {
		return err
	}
	for _, p := range rep.Problems {
		fmt.Printf("DAMAGE  %s\n", p)
	}
	for i, o := range rep.Orphans {
		if i == 20 {
			fmt.Printf("ORPHAN  … and %d more\n", len(rep.Orphans)-20)
			break
		}
		fmt.Printf("ORPHAN  %s (no database row; collected by the server after a grace period)\n", o)
	}
	fmt.Printf("%s: %d messages, %d distinct contents (%d bytes), %d queued, %d awaiting collection, %d orphans, %d problems\n",
		dir, rep.MailRows, rep.Blobs, rep.BlobBytes, rep.QueueRows, rep.Pending, len(rep.Orphans), len(rep.Problems))
	if rep.Damaged() {
		return fmt.Errorf("%d problems found in %s", len(rep.Problems), dir)
	}
	return nil
}
