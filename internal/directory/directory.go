// Package directory answers "who receives mail sent to this address?" from
// an in-memory view of the store's domains, accounts and aliases.
//
// The view is an immutable snapshot behind an atomic pointer: Resolve runs
// for every RCPT command (including floods of bounces to unknown users, see
// DESIGN principle 1) and takes no lock and touches no disk. A background
// loop polls the store's cheap directory version and swaps in a fresh
// snapshot when it moves.
package directory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"pimail/internal/store"
)

// PollInterval is how often Start's loop checks store.DirectoryVersion.
const PollInterval = 250 * time.Millisecond

// Errors returned by Resolve; callers test them with errors.Is.
var (
	// ErrUnknownUser: the domain is ours but nobody receives at the address
	// (SMTP: 550 5.1.1, RFC 3463 "bad destination mailbox address").
	ErrUnknownUser = errors.New("directory: unknown user")
	// ErrNotLocalDomain: the domain is not one of ours; accepting it would
	// make an open relay (SMTP: 550 5.7.1).
	ErrNotLocalDomain = errors.New("directory: not a local domain")
	// ErrNotReady: the directory has not been loaded yet (SMTP: 451 4.3.0).
	ErrNotReady = errors.New("directory: not loaded yet")
)

// Resolution is where mail for one address goes. Its slices are shared with
// the snapshot they came from and must not be modified.
type Resolution struct {
	// Accounts are the local account IDs, deduplicated, in alias order.
	Accounts []int64
	// Remote are targets outside the local domains (alias forwarding),
	// deduplicated; they are for the outbound queue.
	Remote []string
}

// View is the in-memory recipient directory. The zero value is not usable;
// create one with New and load it with Start (or Reload).
type View struct {
	st     store.DirectoryReader
	logger *slog.Logger
	snap   atomic.Pointer[snapshot]
}

// New returns a view over st. It holds no data until Start or Reload.
func New(st store.DirectoryReader, logger *slog.Logger) *View {
	if logger == nil {
		logger = slog.Default()
	}
	v := &View{st: st, logger: logger.With("component", "directory")}
	v.snap.Store(emptySnapshot())
	return v
}

// Start loads the directory, then keeps it fresh in the background until
// ctx ends: every PollInterval it reads store.DirectoryVersion and reloads
// when the version moved. A failed reload keeps the last good snapshot.
// Start returns an error only when the first load fails.
func (v *View) Start(ctx context.Context) error {
	if err := v.Reload(ctx); err != nil {
		return err
	}
	go v.poll(ctx)
	return nil
}

func (v *View) poll(ctx context.Context) {
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := v.refresh(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			// Log the transition only, not every 250 ms.
			v.logger.Warn("directory reload failed; keeping the last snapshot", "err", err)
			failing = true
		case err == nil && failing:
			v.logger.Info("directory reload works again", "version", v.Version())
			failing = false
		}
	}
}

// refresh reloads only when the store's directory version moved.
func (v *View) refresh(ctx context.Context) error {
	ver, err := v.st.DirectoryVersion(ctx)
	if err != nil {
		return fmt.Errorf("directory version: %w", err)
	}
	if ver == v.snap.Load().version {
		return nil
	}
	return v.Reload(ctx)
}

// Reload reads the whole directory from the store and swaps it in.
func (v *View) Reload(ctx context.Context) error {
	d, err := v.st.Directory(ctx)
	if err != nil {
		return fmt.Errorf("load directory: %w", err)
	}
	s := buildSnapshot(d)
	v.snap.Store(s)
	v.logger.Debug("directory loaded", "version", s.version,
		"domains", len(s.domains), "accounts", len(s.accounts)+len(s.disabled), "aliases", len(s.aliases))
	return nil
}

// Version is the store directory version of the current snapshot
// (-1 before the first load).
func (v *View) Version() int64 { return v.snap.Load().version }

// IsLocalDomain reports whether mail for domain is delivered here.
func (v *View) IsLocalDomain(domain string) bool {
	_, ok := v.snap.Load().domains[normalizeDomain(domain)]
	return ok
}

// Limited reports whether the account has a storage limit, so that its
// usage must be read before a delivery; unlimited accounts need no read.
// A change of limit reaches it with the directory, within PollInterval.
// Before the first load every account counts as limited.
func (v *View) Limited(accountID int64) bool {
	s := v.snap.Load()
	if s.version < 0 {
		return true
	}
	_, ok := s.limited[accountID]
	return ok
}

// Resolve says who receives mail sent to address. Matching is
// case-insensitive. In order:
//  1. an enabled account or an alias with exactly this address;
//  2. the same after removing a "+detail" subaddress (RFC 5233);
//  3. the domain's catch-all alias "@domain".
//
// A disabled account stops the search (it does not receive and is not
// handed to the catch-all). The bare "postmaster" recipient (RFC 5321
// §4.5.1) resolves to postmaster at the first local domain that has one.
// The returned slices are shared and read-only.
func (v *View) Resolve(address string) (Resolution, error) {
	s := v.snap.Load()
	if s.version < 0 {
		return Resolution{}, ErrNotReady
	}
	addr := normalize(address)
	_, domain, ok := split(addr)
	if !ok {
		if addr == "postmaster" {
			return s.postmaster()
		}
		return Resolution{}, ErrUnknownUser
	}
	if _, local := s.domains[domain]; !local {
		return Resolution{}, ErrNotLocalDomain
	}
	return s.resolveLocal(addr, domain)
}

func (s *snapshot) resolveLocal(addr, domain string) (Resolution, error) {
	if r, found, err := s.lookup(addr); found {
		return r, err
	}
	if base, ok := stripSubaddress(addr); ok {
		if r, found, err := s.lookup(base); found {
			return r, err
		}
	}
	if r, ok := s.aliases["@"+domain]; ok {
		return nonEmpty(r)
	}
	return Resolution{}, ErrUnknownUser
}

// lookup finds an exact account or alias; found is false when the address
// names neither, so the caller may try the next rule.
func (s *snapshot) lookup(addr string) (r Resolution, found bool, err error) {
	if r, ok := s.accounts[addr]; ok {
		return r, true, nil
	}
	if _, ok := s.disabled[addr]; ok {
		return Resolution{}, true, ErrUnknownUser
	}
	if r, ok := s.aliases[addr]; ok {
		r, err := nonEmpty(r)
		return r, true, err
	}
	return Resolution{}, false, nil
}

func (s *snapshot) postmaster() (Resolution, error) {
	for _, d := range s.domainList {
		if r, err := s.resolveLocal("postmaster@"+d, d); err == nil {
			return r, nil
		}
	}
	return Resolution{}, ErrUnknownUser
}

// nonEmpty turns an alias whose targets all vanished into an unknown user.
func nonEmpty(r Resolution) (Resolution, error) {
	if len(r.Accounts) == 0 && len(r.Remote) == 0 {
		return Resolution{}, ErrUnknownUser
	}
	return r, nil
}

func normalizeDomain(d string) string {
	_, dom, _ := split(normalize("@" + d))
	return dom
}
