package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"pimail/internal/mailimport"
	"pimail/internal/metrics"
)

func init() {
	register("import", "import mail from mbox files, a Maildir or an IMAP server", cmdImport)
}

const importDoc = `
Sources:
  mbox FILE...   mboxrd (default) or mboxo files; each file goes to --mailbox,
                 or to a mailbox named after the file ("sent.mbox" → "sent").
                 Flags come from Status:/X-Status:/X-Mozilla-Status: headers.
  maildir DIR    a Maildir++ tree: DIR is INBOX, DIR/.Sub.Folder is "Sub/Folder";
                 flags from the ":2," file name suffix.
  imap           every folder of a remote account, with flags and dates.
                 Re-running continues where the last run stopped, without
                 duplicates (state in DATA/import/).

Messages are stored one by one, each durably; Ctrl-C stops cleanly.`

func cmdImport(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprintf(os.Stderr, "usage: pimail import mbox|maildir|imap [flags] ...\n%s\n", importDoc)
		if len(args) == 0 {
			return usagef("missing source type")
		}
		return nil
	}
	switch args[0] {
	case "mbox":
		return importMbox(args[1:])
	case "maildir":
		return importMaildir(args[1:])
	case "imap":
		return importIMAP(args[1:])
	}
	return usagef("unknown source type %q (want mbox, maildir or imap)", args[0])
}

// importFlags are the flags every source takes.
type importFlags struct {
	data    dataFlags
	account *string
	maxSize *int64
	verbose *bool
}

func addImportFlags(fs *flag.FlagSet) importFlags {
	return importFlags{
		data:    addDataFlags(fs),
		account: fs.String("account", "", "address of the account to import into (required)"),
		maxSize: fs.Int64("max-size", mailimport.DefaultMaxMessageSize, "skip messages larger than this many bytes"),
		verbose: fs.Bool("verbose", false, "log every mailbox and skipped message"),
	}
}

// runImport opens the store and an importer, runs fn with a context that
// Ctrl-C cancels, and prints the summary with the rate and peak memory.
func runImport(f importFlags, fn func(ctx context.Context, im *mailimport.Importer) error) error {
	if *f.account == "" {
		return usagef("--account is required")
	}
	log := quietLogger()
	if *f.verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	loc, err := f.data.loc()
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
	im, err := mailimport.New(ctx, st, *f.account, log)
	if err != nil {
		return err
	}
	im.MaxMessageSize = *f.maxSize
	start := time.Now()
	lastReport := start
	im.Progress = func(s mailimport.Stats) {
		if now := time.Now(); now.Sub(lastReport) >= 5*time.Second {
			lastReport = now
			fmt.Fprintf(os.Stderr, "… %d messages, %.0f msgs/s\n", s.Messages, float64(s.Messages)/now.Sub(start).Seconds())
		}
	}
	err = fn(ctx, im)
	s := im.Stats()
	el := time.Since(start)
	fmt.Printf("imported %d messages (%.1f MiB) into %d mailboxes in %v: %.0f msgs/s; skipped %d, errors %d; peak RSS %.1f MiB\n",
		s.Messages, float64(s.Bytes)/(1<<20), s.Mailboxes, el.Round(time.Millisecond),
		float64(s.Messages)/max(el.Seconds(), 1e-9), s.Skipped, s.Errors, float64(metrics.PeakRSS())/(1<<20))
	if err != nil {
		return err
	}
	if s.Errors > 0 {
		return fmt.Errorf("%d folders or messages failed (see above)", s.Errors)
	}
	return nil
}

func importMbox(args []string) error {
	fs := newFlags("import mbox", "--account ADDRESS FILE...", "Import mbox files.")
	f := addImportFlags(fs)
	mailbox := fs.String("mailbox", "", "mailbox to import into (default: named after each file)")
	variant := fs.String("variant", "mboxrd", `"From " quoting: mboxrd (>From lines at any depth) or mboxo (only >From)`)
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	v, err := mailimport.ParseMboxVariant(*variant)
	if err != nil {
		return usageError{err}
	}
	if len(files) == 0 {
		return usagef("no mbox file given")
	}
	return runImport(f, func(ctx context.Context, im *mailimport.Importer) error {
		for _, file := range files {
			name := *mailbox
			if name == "" {
				name = mailimport.MboxMailboxName(file)
			}
			if err := im.ImportMboxFile(ctx, file, name, v); err != nil {
				return err
			}
		}
		return nil
	})
}

func importMaildir(args []string) error {
	fs := newFlags("import maildir", "--account ADDRESS DIR", "Import a Maildir++ tree.")
	f := addImportFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one maildir directory")
	}
	return runImport(f, func(ctx context.Context, im *mailimport.Importer) error {
		return im.ImportMaildir(ctx, pos[0])
	})
}

func importIMAP(args []string) error {
	fs := newFlags("import imap", "--account ADDRESS --host HOST[:PORT] --user USER (--password-stdin | --password P)",
		"Copy every folder of a remote IMAP account; re-runs continue without duplicates.")
	f := addImportFlags(fs)
	host := fs.String("host", "", "IMAP server, HOST or HOST:PORT (port 993 with --tls, else 143)")
	user := fs.String("user", "", "user name on the remote server")
	pass := fs.String("password", "", "remote password (visible in the process list; prefer --password-stdin)")
	passStdin := fs.Bool("password-stdin", false, "read the remote password from the first line of standard input")
	useTLS := fs.Bool("tls", false, "implicit TLS (the default)")
	startTLS := fs.Bool("starttls", false, "plain connection upgraded with STARTTLS")
	insecure := fs.Bool("insecure", false, "no TLS at all (trusted networks only)")
	skipVerify := fs.Bool("tls-skip-verify", false, "do not verify the server's certificate")
	batch := fs.Int("batch", mailimport.DefaultBatch, "messages per UID FETCH")
	conns := fs.Int("connections", mailimport.DefaultConnections, "folders copied at once, one connection each")
	reimport := fs.Bool("reimport", false, "import folders whose UIDVALIDITY changed again, from the start")
	includeAll := fs.Bool("include-all", false, `also import \All folders (Gmail "All Mail": duplicates of the other folders)`)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	if *host == "" || *user == "" {
		return usagef("--host and --user are required")
	}
	sec := mailimport.SecurityTLS
	n := 0
	for _, b := range []bool{*useTLS, *startTLS, *insecure} {
		if b {
			n++
		}
	}
	if n > 1 {
		return usagef("--tls, --starttls and --insecure exclude each other")
	}
	switch {
	case *startTLS:
		sec = mailimport.SecurityStartTLS
	case *insecure:
		sec = mailimport.SecurityInsecure
	}
	addr := *host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		port := "143"
		if sec == mailimport.SecurityTLS {
			port = "993"
		}
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), port)
	}
	password, err := remotePassword(*pass, *passStdin)
	if err != nil {
		return err
	}
	loc, err := f.data.loc()
	if err != nil {
		return err
	}
	hostname, _, _ := net.SplitHostPort(addr)
	src := mailimport.IMAPSource{
		Addr: addr, User: *user, Password: password, Security: sec, Batch: *batch, Connections: *conns,
		StatePath:  mailimport.IMAPStatePath(loc.dir, *f.account, addr, *user),
		Reimport:   *reimport,
		IncludeAll: *includeAll,
		TLSConfig:  &tls.Config{ServerName: hostname, MinVersion: tls.VersionTLS12, InsecureSkipVerify: *skipVerify},
	}
	return runImport(f, func(ctx context.Context, im *mailimport.Importer) error {
		return im.ImportIMAP(ctx, src)
	})
}

// remotePassword reads the password of the remote account (no length
// rule: it is someone else's password).
func remotePassword(flagValue string, fromStdin bool) (string, error) {
	switch {
	case fromStdin && flagValue != "":
		return "", usagef("--password and --password-stdin exclude each other")
	case fromStdin:
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return "", fmt.Errorf("read password from stdin: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), nil
	case flagValue == "":
		return "", usagef("a password is needed: --password P or --password-stdin")
	}
	return flagValue, nil
}
