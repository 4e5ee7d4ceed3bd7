package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"pimail/internal/dnscheck"
	"pimail/internal/queue"
	"pimail/internal/store"
)

// maxPolicyFile bounds a policy read from a file (RFC 8461 §3.3 lets
// senders refuse policies over 64 KB).
const maxPolicyFile = 64 << 10

// domainMTASTS is `pimail domain mta-sts DOMAIN [FILE|-]`: without FILE
// it prints the MTA-STS policy the server publishes for DOMAIN; with FILE
// (- for standard input) it publishes the policy in it, after checking
// that senders can read it (RFC 8461 §3.2). An empty file stops
// publishing.
func domainMTASTS(loc storeLoc, pos []string) error {
	if len(pos) != 1 && len(pos) != 2 {
		return usagef("want DOMAIN and optionally FILE")
	}
	d, err := normalizeDomain(pos[0])
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		return withStore(loc, func(ctx context.Context, st store.Store) error {
			p, err := st.MTASTSPolicy(ctx, d)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no MTA-STS policy is published for %s", d)
			}
			if err != nil {
				return err
			}
			fmt.Print(strings.ReplaceAll(p, "\r\n", "\n"))
			return nil
		})
	}
	in := os.Stdin
	if pos[1] != "-" {
		if in, err = os.Open(pos[1]); err != nil {
			return fmt.Errorf("read the policy: %w", err)
		}
		defer in.Close()
	}
	b, err := io.ReadAll(io.LimitReader(in, maxPolicyFile+1))
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	if len(b) > maxPolicyFile {
		return fmt.Errorf("the policy is larger than %d bytes", maxPolicyFile)
	}
	policy := dnscheck.NormalizeMTASTSPolicy(string(b))
	if policy != "" {
		if err := queue.CheckPolicy(policy); err != nil {
			return fmt.Errorf("not published: %w", err)
		}
	}
	return withStore(loc, func(ctx context.Context, st store.Store) error {
		if err := st.SetMTASTSPolicy(ctx, d, policy); err != nil {
			return fmt.Errorf("publish the MTA-STS policy of %s: %w", d, err)
		}
		if policy == "" {
			fmt.Printf("no MTA-STS policy is published for %s now\n", d)
			return nil
		}
		fmt.Printf("MTA-STS policy of %s published; change the id in its _mta-sts TXT record now (RFC 8461 §3.1), so that senders fetch it again\n", d)
		return nil
	})
}
