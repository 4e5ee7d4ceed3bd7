// Command pimail is a private mail server in one binary: SMTP, IMAP, and
// the tools to run it. `pimail help` lists the commands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// command is one subcommand; run gets the arguments after its name.
type command struct {
	summary string
	run     func(args []string) error
}

// commands holds every subcommand; files of this package add theirs in
// their init functions with register.
var commands = map[string]command{}

func register(name, summary string, run func(args []string) error) {
	commands[name] = command{summary, run}
}

func init() {
	register("serve", "run the mail server from a configuration file and flags", cmdServe)
	register("localserve", "start a ready-to-use server on localhost (quick start)", cmdLocalserve)
	register("domain", "add, list or remove mail domains", cmdDomain)
	register("account", "add, list, remove accounts or set passwords", cmdAccount)
	register("alias", "add, list or remove aliases and catch-alls", cmdAlias)
	register("config", "print an example configuration file with every default", cmdConfig)
	register("help", "show help for a command", cmdHelp)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	if name == "-h" || name == "--help" || name == "-help" {
		usage()
		return
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "pimail: unknown command %q\n\n", name)
		usage()
		os.Exit(2)
	}
	if err := cmd.run(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "pimail %s: %v\n", name, err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "pimail %s: %v\n", name, err)
		os.Exit(1)
	}
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: pimail COMMAND [flags] [arguments]\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-11s %s\n", n, commands[n].summary)
	}
	b.WriteString("\n`pimail COMMAND --help` shows a command's flags.\n")
	fmt.Fprint(os.Stderr, b.String())
}

func cmdHelp(args []string) error {
	if len(args) == 0 {
		usage()
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return usageError{fmt.Errorf("unknown command %q", args[0])}
	}
	return cmd.run([]string{"--help"})
}

// usageError marks wrong arguments (exit status 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }
