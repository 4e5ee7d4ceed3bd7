package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"pimail/internal/message"
	"pimail/internal/password"
	"pimail/internal/store"
)

// subcommands dispatches "pimail NOUN VERB ...".
func subcommands(noun string, verbs map[string]func(loc storeLoc, args []string) error, args []string, argsUsage map[string]string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprintf(os.Stderr, "usage: pimail %s VERB [--data DIR] ...\n\nverbs:\n", noun)
		for _, v := range []string{"add", "passwd", "list", "remove", "admin", "unadmin", "quota", "mta-sts"} {
			if _, ok := verbs[v]; ok {
				fmt.Fprintf(os.Stderr, "  %s %s %s\n", noun, v, argsUsage[v])
			}
		}
		if len(args) == 0 {
			return usagef("missing verb")
		}
		return nil
	}
	verb, ok := verbs[args[0]]
	if !ok {
		return usagef("unknown verb %q", args[0])
	}
	fs := newFlags(noun+" "+args[0], argsUsage[args[0]], "")
	data := addDataFlags(fs)
	var pw *string
	var pwStdin *bool
	if noun == "account" && (args[0] == "add" || args[0] == "passwd") {
		pw = fs.String("password", "", "the password (visible in the process list; prefer --password-stdin)")
		pwStdin = fs.Bool("password-stdin", false, "read the password from the first line of standard input")
	}
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if pw != nil {
		p, err := readPassword(*pw, *pwStdin)
		if err != nil {
			return err
		}
		pos = append(pos, p) // the verb takes the password as its last argument
	}
	loc, err := data.loc()
	if err != nil {
		return err
	}
	return verb(loc, pos)
}

func readPassword(flagValue string, fromStdin bool) (string, error) {
	switch {
	case fromStdin && flagValue != "":
		return "", usagef("--password and --password-stdin exclude each other")
	case fromStdin:
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return "", fmt.Errorf("read password from stdin: %w", err)
		}
		flagValue = strings.TrimRight(line, "\r\n")
	case flagValue == "":
		return "", usagef("a password is needed: --password PASS or --password-stdin")
	}
	if len(flagValue) < 8 {
		return "", usagef("the password must have at least 8 characters")
	}
	return flagValue, nil
}

// withStore opens the store of an existing data directory, runs f, and
// closes the store.
func withStore(loc storeLoc, f func(ctx context.Context, st store.Store) error) error {
	st, err := openAdminStore(loc)
	if err != nil {
		return err
	}
	defer st.Close()
	return f(context.Background(), st)
}

func cmdDomain(args []string) error {
	one := func(pos []string) (string, error) {
		if len(pos) != 1 {
			return "", usagef("want exactly one DOMAIN")
		}
		return normalizeDomain(pos[0])
	}
	return subcommands("domain", map[string]func(storeLoc, []string) error{
		"add": func(loc storeLoc, pos []string) error {
			d, err := one(pos)
			if err != nil {
				return err
			}
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				if _, err := st.AddDomain(ctx, d); err != nil {
					return fmt.Errorf("add domain %s: %w", d, err)
				}
				fmt.Printf("domain %s added\n", d)
				return nil
			})
		},
		"remove": func(loc storeLoc, pos []string) error {
			d, err := one(pos)
			if err != nil {
				return err
			}
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				if err := st.RemoveDomain(ctx, d); err != nil {
					return fmt.Errorf("remove domain %s: %w", d, err)
				}
				fmt.Printf("domain %s removed\n", d)
				return nil
			})
		},
		"list": func(loc storeLoc, pos []string) error {
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				ds, err := st.Domains(ctx)
				if err != nil {
					return err
				}
				for _, d := range ds {
					fmt.Println(d.Name)
				}
				return nil
			})
		},
		"mta-sts": domainMTASTS,
	}, args, map[string]string{"add": "DOMAIN", "remove": "DOMAIN", "list": "", "mta-sts": "DOMAIN [FILE|-]"})
}

func cmdAccount(args []string) error {
	addr := func(pos []string, n int) (string, error) {
		if len(pos) != n {
			return "", usagef("want exactly one ADDRESS")
		}
		return normalizeAddress(pos[0])
	}
	return subcommands("account", map[string]func(storeLoc, []string) error{
		"add": func(loc storeLoc, pos []string) error {
			a, err := addr(pos, 2)
			if err != nil {
				return err
			}
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				if err := addAccount(ctx, st, a, pos[1]); err != nil {
					return err
				}
				fmt.Printf("account %s added\n", a)
				return nil
			})
		},
		"passwd": func(loc storeLoc, pos []string) error {
			a, err := addr(pos, 2)
			if err != nil {
				return err
			}
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				if err := password.Set(ctx, st, a, pos[1]); err != nil {
					return err
				}
				fmt.Printf("password of %s changed\n", a)
				return nil
			})
		},
		"remove": func(loc storeLoc, pos []string) error {
			a, err := addr(pos, 1)
			if err != nil {
				return err
			}
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				aliases, err := st.Aliases(ctx)
				if err != nil {
					return err
				}
				if err := st.RemoveAccount(ctx, a); err != nil {
					return fmt.Errorf("remove account %s: %w", a, err)
				}
				fmt.Printf("account %s removed with all its mail\n", a)
				for _, al := range aliases {
					if slices.Contains(al.Targets, a) {
						fmt.Printf("  and from the alias %s\n", al.Address)
					}
				}
				return nil
			})
		},
		"admin":   setAdminVerb(addr, true),
		"unadmin": setAdminVerb(addr, false),
		"quota":   setQuotaVerb,
		"list": func(loc storeLoc, pos []string) error {
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				as, err := st.Accounts(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				for _, a := range as {
					state := "active"
					if a.Disabled {
						state = "disabled"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Address, state, a.Created.Format("2006-01-02"))
				}
				return tw.Flush()
			})
		},
	}, args, map[string]string{
		"add":    "(--password PASS | --password-stdin) ADDRESS",
		"passwd": "(--password PASS | --password-stdin) ADDRESS",
		"remove": "ADDRESS", "list": "",
		"admin": "ADDRESS (may use the web admin at /admin/)", "unadmin": "ADDRESS",
		"quota": "ADDRESS SIZE (e.g. 500M, 2G; 0 is unlimited)",
	})
}

// setQuotaVerb sets an account's storage limit (RFC 9208 STORAGE).
func setQuotaVerb(loc storeLoc, pos []string) error {
	if len(pos) != 2 {
		return usagef("want ADDRESS and SIZE")
	}
	a, err := normalizeAddress(pos[0])
	if err != nil {
		return err
	}
	n, err := parseSize(pos[1])
	if err != nil {
		return usagef("%v", err)
	}
	return withStore(loc, func(ctx context.Context, st store.Store) error {
		if err := st.SetQuota(ctx, a, n); err != nil {
			return fmt.Errorf("set quota of %s: %w", a, err)
		}
		if n == 0 {
			fmt.Printf("quota of %s: unlimited\n", a)
		} else {
			fmt.Printf("quota of %s: %d bytes\n", a, n)
		}
		return nil
	})
}

// parseSize reads a byte count: digits with an optional binary suffix K,
// M, G or T (KiB, MiB, …; "B" or "iB" may follow), case-insensitive:
// "500M", "2G", "1024", "0".
func parseSize(v string) (int64, error) {
	s := strings.ToUpper(strings.TrimSpace(v))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	shift := 0
	if s != "" {
		if i := strings.IndexByte("KMGT", s[len(s)-1]); i >= 0 {
			shift = 10 * (i + 1)
			s = s[:len(s)-1]
		}
	}
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional K, M, G or T suffix", v)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("size %q is too large", v)
	}
	return n << shift, nil
}

// setAdminVerb grants or revokes the web admin.
func setAdminVerb(addr func([]string, int) (string, error), admin bool) func(storeLoc, []string) error {
	return func(loc storeLoc, pos []string) error {
		a, err := addr(pos, 1)
		if err != nil {
			return err
		}
		return withStore(loc, func(ctx context.Context, st store.Store) error {
			if err := st.SetAdmin(ctx, a, admin); err != nil {
				return fmt.Errorf("set admin of %s: %w", a, err)
			}
			fmt.Printf("%s: admin %v\n", a, admin)
			return nil
		})
	}
}

func cmdAlias(args []string) error {
	return subcommands("alias", map[string]func(storeLoc, []string) error{
		"add": func(loc storeLoc, pos []string) error {
			if len(pos) < 2 {
				return usagef("want ADDRESS and at least one TARGET")
			}
			a, err := normalizeAliasAddress(pos[0])
			if err != nil {
				return err
			}
			targets := make([]string, 0, len(pos)-1)
			for _, t := range pos[1:] {
				n, err := normalizeAddress(t)
				if err != nil {
					return err
				}
				targets = append(targets, n)
			}
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				if err := st.AddAlias(ctx, a, targets); err != nil {
					if errors.Is(err, store.ErrNotFound) {
						return fmt.Errorf("add alias %s: domain %s does not exist (pimail domain add)", a, message.DomainOf(a))
					}
					return fmt.Errorf("add alias %s: %w", a, err)
				}
				fmt.Printf("alias %s -> %s\n", a, strings.Join(targets, ", "))
				return nil
			})
		},
		"remove": func(loc storeLoc, pos []string) error {
			if len(pos) != 1 {
				return usagef("want exactly one ADDRESS")
			}
			a, err := normalizeAliasAddress(pos[0])
			if err != nil {
				return err
			}
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				if err := st.RemoveAlias(ctx, a); err != nil {
					return fmt.Errorf("remove alias %s: %w", a, err)
				}
				fmt.Printf("alias %s removed\n", a)
				return nil
			})
		},
		"list": func(loc storeLoc, pos []string) error {
			return withStore(loc, func(ctx context.Context, st store.Store) error {
				as, err := st.Aliases(ctx)
				if err != nil {
					return err
				}
				for _, a := range as {
					fmt.Printf("%s -> %s\n", a.Address, strings.Join(a.Targets, ", "))
				}
				return nil
			})
		},
	}, args, map[string]string{
		"add":    "ADDRESS TARGET... (ADDRESS @domain is the domain's catch-all)",
		"remove": "ADDRESS", "list": "",
	})
}

// addAccount creates an account with its password credentials.
func addAccount(ctx context.Context, st password.AccountWriter, address, pw string) error {
	if _, err := password.AddAccount(ctx, st, address, pw); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("add account %s: domain %s does not exist (pimail domain add)", address, message.DomainOf(address))
		}
		return err
	}
	return nil
}

// normalizeDomain lower-cases and checks a domain name.
func normalizeDomain(d string) (string, error) {
	d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	if d == "" || len(d) > 253 || strings.ContainsAny(d, "@ \t/\\") || strings.Contains(d, "..") {
		return "", usagef("invalid domain %q", d)
	}
	return d, nil
}

// normalizeAddress lower-cases and checks local@domain.
func normalizeAddress(a string) (string, error) {
	a = strings.TrimSpace(a)
	at := strings.LastIndexByte(a, '@')
	if at <= 0 || len(a) > 254 || strings.ContainsAny(a, " \t<>,;\"") {
		return "", usagef("invalid address %q", a)
	}
	d, err := normalizeDomain(a[at+1:])
	if err != nil {
		return "", err
	}
	return strings.ToLower(a[:at]) + "@" + d, nil
}

// normalizeAliasAddress accepts local@domain or the catch-all @domain.
func normalizeAliasAddress(a string) (string, error) {
	if strings.HasPrefix(strings.TrimSpace(a), "@") {
		d, err := normalizeDomain(strings.TrimSpace(a)[1:])
		return "@" + d, err
	}
	return normalizeAddress(a)
}
