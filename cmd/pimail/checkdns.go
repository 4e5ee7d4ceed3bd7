package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"pimail/internal/config"
	"pimail/internal/dkim"
	"pimail/internal/dnscheck"
	"pimail/internal/dnsresolver"
	"pimail/internal/store"
)

func init() {
	register("check", "check the setup from outside: check dns DOMAIN", cmdCheck)
}

func cmdCheck(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprintln(os.Stderr, "usage: pimail check dns [--data DIR] [--config FILE] [--hostname NAME] [--dns HOST:PORT] DOMAIN")
		if len(args) == 0 {
			return usagef("missing what to check")
		}
		return nil
	}
	switch args[0] {
	case "dns":
		return cmdCheckDNS(args[1:])
	}
	return usagef("unknown check %q (want dns)", args[0])
}

func cmdCheckDNS(args []string) error {
	fs := newFlags("check dns", "DOMAIN", `Looks up every DNS record the domain needs (the ones "pimail quickstart"
prints) and compares it with what is expected: MX, the host's addresses
and reverse names, SPF (evaluated for the host's addresses), the DKIM keys
stored in the data directory, DMARC, MTA-STS, TLS-RPT, autoconfig and the
SRV records of RFC 6186. One line per check: OK, WRONG (what is there and
what is expected) or MISSING. Exit status 1 if any check fails.`)
	cfgFile := fs.String("config", "", "configuration file: hostname, data directory and DNS servers come from it")
	data := fs.String("data", "", "data directory with the DKIM keys (default: the config's, else "+defaultDataDir()+")")
	database := fs.String("database", "", "PostgreSQL URL of the store (default: the config's)")
	hostname := fs.String("hostname", "", "the server's public name (default: the config's hostname)")
	servers := fs.String("dns", "", "DNS servers to ask, HOST[:PORT], comma-separated (default: the config's, else /etc/resolv.conf)")
	ips := fs.String("ip", "", "addresses the host name must have, comma-separated (default: whatever it has)")
	timeout := fs.Duration("timeout", 3*time.Second, "timeout of one DNS query")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one DOMAIN")
	}
	domain, err := normalizeDomain(pos[0])
	if err != nil {
		return err
	}
	cfg := config.Default()
	cfg.Data = defaultDataDir()
	if *cfgFile != "" {
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
	host, err := normalizeDomain(cfg.Hostname)
	if err != nil {
		return err
	}
	dnsCfg := dnsresolver.Config{Servers: cfg.DNS.Servers, Timeout: *timeout}
	if *servers != "" {
		dnsCfg.Servers = splitList(*servers)
	}
	var addrs []netip.Addr
	for _, s := range splitList(*ips) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return usagef("--ip: %v", err)
		}
		addrs = append(addrs, a.Unmap())
	}
	keys, err := storedDKIM(storeLoc{cfg.Data, cfg.Database}, domain)
	if err != nil {
		return err
	}
	l, err := dnscheck.NewLookuper(dnsCfg)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelT()
	// Each line is printed as its check ends: with a resolver that does not
	// answer, every query waits --timeout (twice per server) and the whole
	// run at most two minutes.
	c := dnscheck.Checker{Lookup: l, Domain: domain, Hostname: host, DKIM: keys, Addrs: addrs,
		Progress: func(r dnscheck.Result) { fmt.Println(r) }}
	results := c.Run(ctx)
	if len(keys) == 0 {
		r := dnscheck.Result{Check: "DKIM", Name: "*._domainkey." + domain, Status: dnscheck.Missing,
			Want: "keys in " + cfg.Data + " (pimail dkim " + domain + " generates them)"}
		fmt.Println(r)
		results = append(results, r)
	}
	if n := dnscheck.Failed(results); n > 0 {
		return fmt.Errorf("%d of %d DNS checks for %s failed", n, len(results), domain)
	}
	fmt.Printf("all %d DNS checks for %s passed\n", len(results), domain)
	return nil
}

// storedDKIM returns the DNS records of the domain's stored DKIM keys.
func storedDKIM(loc storeLoc, domain string) ([]dkim.Record, error) {
	if _, err := os.Stat(filepath.Join(loc.dir, "pimail.db")); loc.database == "" && errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no pimail data directory at %s (give --data or --config)", loc.dir)
	}
	var out []dkim.Record
	err := withStore(loc, func(ctx context.Context, st store.Store) error {
		keys, err := st.DKIMKeys(ctx, domain)
		if err != nil {
			return fmt.Errorf("read DKIM keys of %s: %w", domain, err)
		}
		for _, k := range keys {
			r, err := dkim.PublicRecord(k)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
