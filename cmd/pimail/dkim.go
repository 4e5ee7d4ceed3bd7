package main

import (
	"context"
	"fmt"

	"pimail/internal/dkim"
	"pimail/internal/store"
)

func init() {
	register("dkim", "print a domain's DKIM DNS records (generating keys if missing)", cmdDKIM)
}

func cmdDKIM(args []string) error {
	fs := newFlags("dkim", "DOMAIN", `Prints the DNS TXT records (selector._domainkey.DOMAIN) of the domain's
DKIM signing keys, ready to paste into the zone. Keys (RSA-2048 and
Ed25519) are generated and stored when the domain has none yet.`)
	data := addDataFlags(fs)
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
	loc, err := data.loc()
	if err != nil {
		return err
	}
	return withStore(loc, func(ctx context.Context, st store.Store) error {
		keys, err := dkim.EnsureKeys(ctx, st, domain)
		if err != nil {
			return err
		}
		for _, k := range keys {
			r, err := dkim.PublicRecord(k)
			if err != nil {
				return err
			}
			fmt.Printf("; %s key, created %s\n%s\n\n", k.Algorithm, k.Created.Format("2006-01-02"), r.ZoneLine())
		}
		return nil
	})
}
