package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"pimail/internal/config"
	"pimail/internal/password"
	"pimail/internal/server"
	"pimail/internal/store"
)

// listenFlags binds --smtp, --imap, ... to the configuration's listen
// addresses; flags given on the command line override the file.
type listenFlags map[string]*string

func addListenFlags(fs *flag.FlagSet) listenFlags {
	lf := listenFlags{}
	for _, name := range []string{"smtp", "submission", "submissions", "imap", "imaps", "pop3", "pop3s", "http", "https", "managesieve"} {
		lf[name] = fs.String(name, "", "listen address for "+name+` (overrides the config; "" turns it off)`)
	}
	return lf
}

func (lf listenFlags) apply(fs *flag.FlagSet, l *config.Listen) {
	set := map[string]*string{
		"smtp": &l.SMTP, "submission": &l.Submission, "submissions": &l.Submissions,
		"imap": &l.IMAP, "imaps": &l.IMAPS, "pop3": &l.POP3, "pop3s": &l.POP3S,
		"http": &l.HTTP, "https": &l.HTTPS, "managesieve": &l.ManageSieve,
	}
	fs.Visit(func(f *flag.Flag) {
		if dst, ok := set[f.Name]; ok {
			*dst = *lf[f.Name]
		}
	})
}

func cmdServe(args []string) error {
	fs := newFlags("serve", "", `Runs the mail server. Settings come from the configuration file (see
"pimail config"), then from these flags.`)
	cfgFile := fs.String("config", "", "configuration file (TOML)")
	data := fs.String("data", "", "data directory (overrides the config's data)")
	database := fs.String("database", "", "PostgreSQL URL of the store, postgres://… (overrides the config's database)")
	hostname := fs.String("hostname", "", "public host name (overrides the config's hostname)")
	lf := addListenFlags(fs)
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	cfg := config.Default()
	if *cfgFile != "" {
		var err error
		if cfg, err = config.Load(*cfgFile); err != nil {
			return err
		}
	}
	if *data != "" {
		cfg.Data = *data
	}
	if *database != "" {
		cfg.Database = *database
	}
	if *hostname != "" {
		cfg.Hostname = *hostname
	}
	lf.apply(fs, &cfg.Listen)
	if err := cfg.Validate(); err != nil {
		return err
	}
	return run(cfg, nil)
}

// run opens the store and serves until SIGINT or SIGTERM.
func run(cfg config.Config, onReady func(addrs map[string]string)) error {
	logger := newLogger(os.Stderr, cfg.Log.Level, cfg.Log.Format)
	if cfg.MemoryLimitMB > 0 {
		debug.SetMemoryLimit(int64(cfg.MemoryLimitMB) << 20)
		logger.Info("soft memory limit set", "mib", cfg.MemoryLimitMB)
	}
	st, err := openServerStore(cfg, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx, cfg, st, logger, func(addrs map[string]string) {
		if onReady != nil {
			onReady(addrs)
		}
		names := make([]string, 0, len(addrs))
		for n, a := range addrs {
			names = append(names, n+"="+a)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "%s %s\n", server.Ready, strings.Join(names, " "))
	})
}

// The quick start's fixed settings: loopback only, unprivileged ports.
const (
	localDomain  = "localhost"
	localAccount = "me@localhost"
	localPwFile  = "localserve-password"
)

func cmdLocalserve(args []string) error {
	fs := newFlags("localserve", "", `Starts a ready-to-use mail server for local use: an SQLite store in the
data directory, loopback listeners on unprivileged ports, and the account
me@localhost whose password it prints. Plain-text login is allowed because
every listener is on loopback. Nothing here is for the internet: see
"pimail serve" and docs/ for a real deployment.`)
	data := fs.String("data", defaultDataDir(), "data directory")
	lf := addListenFlags(fs)
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	cfg := config.Default()
	cfg.Data = *data
	cfg.Hostname = "localhost"
	cfg.Listen = config.Listen{
		SMTP:        "127.0.0.1:2525",
		Submission:  "127.0.0.1:1587",
		Submissions: "127.0.0.1:1465",
		IMAP:        "127.0.0.1:1143",
		IMAPS:       "127.0.0.1:1993",
		POP3:        "127.0.0.1:1110",
		POP3S:       "127.0.0.1:1995",
		HTTP:        "127.0.0.1:8080",
		ManageSieve: "127.0.0.1:4190",
	}
	lf.apply(fs, &cfg.Listen) // another port when one of these is taken
	cfg.TLS = config.TLS{SelfSigned: true}
	cfg.Submission.AllowLoopbackAuth = true
	pw, err := ensureLocalAccount(cfg.Data)
	if err != nil {
		return err
	}
	return run(cfg, func(addrs map[string]string) {
		fmt.Fprintf(os.Stdout, `
pimail is running on localhost.

  account:   %s
  password:  %s

  send mail: SMTP  %s   (no TLS needed on loopback)
             submission %s (AUTH, STARTTLS optional)  submissions %s
  read mail: IMAP  %s   (STARTTLS optional)  IMAPS %s (self-signed)
             POP3  %s   POP3S %s
  webmail:   http://%s/     admin: http://%s/admin/
  filters:   ManageSieve %s (Sieve scripts; STARTTLS optional)

  try:  swaks --server %s --to %s
  data: %s    stop with Ctrl-C
`, localAccount, pw, addrs["smtp"], addrs["submission"], addrs["submissions"], addrs["imap"], addrs["imaps"], addrs["pop3"], addrs["pop3s"], addrs["http"], addrs["http"], addrs["managesieve"], addrs["smtp"], localAccount, cfg.Data)
	})
}

// ensureLocalAccount creates the localhost domain and account on first use
// and keeps the generated password in the data directory, so every start
// can print it.
func ensureLocalAccount(dir string) (string, error) {
	pwPath := filepath.Join(dir, localPwFile)
	st, err := createStore(dir)
	if err != nil {
		return "", err
	}
	defer st.Close()
	ctx := context.Background()
	if acct, err := st.Account(ctx, localAccount); err == nil {
		// The first password is kept to be printed again, as long as it is
		// the account's: after pimail account passwd it is not.
		const changed = "(changed with pimail account passwd)"
		b, err := os.ReadFile(pwPath)
		if errors.Is(err, fs.ErrNotExist) {
			return changed, nil
		} else if err != nil {
			return "", err
		}
		pw := strings.TrimSpace(string(b))
		if ok, err := password.Verify(acct.PasswordHash, pw); err != nil || !ok {
			return changed, nil
		}
		return pw, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	if _, err := st.AddDomain(ctx, localDomain); err != nil && !errors.Is(err, store.ErrExists) {
		return "", fmt.Errorf("add domain: %w", err)
	}
	pw := rand.Text()[:16]
	if err := addAccount(ctx, st, localAccount, pw); err != nil {
		return "", err
	}
	if err := os.WriteFile(pwPath, []byte(pw+"\n"), 0o600); err != nil {
		return "", err
	}
	return pw, nil
}

func cmdConfig(args []string) error {
	fs := newFlags("config", "", "Prints a complete configuration file with every default.")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	fmt.Print(config.Example())
	return nil
}
