package directory

import (
	"sort"
	"strings"

	"pimail/internal/store"
)

// MaxAliasDepth bounds alias expansion: an alias whose targets are aliases
// is followed at most this many levels deep. Deeper chains and loops are
// cut off; the targets reached so far still count.
const MaxAliasDepth = 10

// snapshot is an immutable, fully expanded copy of the directory. Every
// alias is expanded when the snapshot is built, so Resolve is a handful of
// map lookups and never walks alias chains per RCPT.
type snapshot struct {
	version int64
	domains map[string]struct{}
	// domainList is sorted; used for the domain-less "postmaster" recipient.
	domainList []string
	// accounts maps an enabled account's address to its resolution (one ID).
	accounts map[string]Resolution
	// disabled holds addresses of disabled accounts: they exist but do not
	// receive, so they neither resolve nor fall through to a catch-all.
	disabled map[string]struct{}
	// aliases maps an alias address (or "@domain" for a catch-all) to its
	// expansion. An expansion may be empty (all targets gone).
	aliases map[string]Resolution
	// limited holds the accounts with a storage limit (QuotaBytes > 0).
	limited map[int64]struct{}
}

func emptySnapshot() *snapshot {
	return &snapshot{
		version:  -1,
		domains:  map[string]struct{}{},
		accounts: map[string]Resolution{},
		disabled: map[string]struct{}{},
		aliases:  map[string]Resolution{},
	}
}

// buildSnapshot turns a store.Directory into a snapshot, expanding aliases.
func buildSnapshot(d store.Directory) *snapshot {
	s := &snapshot{
		version:  d.Version,
		domains:  make(map[string]struct{}, len(d.Domains)),
		accounts: make(map[string]Resolution, len(d.Accounts)),
		disabled: map[string]struct{}{},
		aliases:  make(map[string]Resolution, len(d.Aliases)),
		limited:  map[int64]struct{}{},
	}
	for _, dom := range d.Domains {
		name := strings.ToLower(dom.Name)
		s.domains[name] = struct{}{}
		s.domainList = append(s.domainList, name)
	}
	sort.Strings(s.domainList)
	for _, a := range d.Accounts {
		if a.QuotaBytes > 0 {
			s.limited[a.ID] = struct{}{}
		}
		addr := normalize(a.Address)
		if a.Disabled {
			s.disabled[addr] = struct{}{}
			continue
		}
		s.accounts[addr] = Resolution{Accounts: []int64{a.ID}}
	}
	raw := make(map[string][]string, len(d.Aliases))
	for _, al := range d.Aliases {
		addr := normalize(al.Address)
		raw[addr] = append(raw[addr], al.Targets...)
	}
	x := expander{s: s, raw: raw}
	for addr := range raw {
		s.aliases[addr] = x.expandAlias(addr)
	}
	return s
}

// expander resolves alias targets recursively while a snapshot is built.
type expander struct {
	s   *snapshot
	raw map[string][]string // alias → targets as stored
}

// expandAlias expands one alias into deduplicated account IDs and remote
// addresses, following nested aliases up to MaxAliasDepth levels and
// never visiting an alias twice (loops end there).
func (x *expander) expandAlias(addr string) Resolution {
	var acc accumulator
	visited := map[string]bool{addr: true}
	x.expandTargets(x.raw[addr], 1, visited, &acc)
	return acc.result()
}

func (x *expander) expandTargets(targets []string, depth int, visited map[string]bool, acc *accumulator) {
	for _, t := range targets {
		x.expandTarget(t, depth, visited, acc)
	}
}

// expandTarget places one alias target: a local account, another alias
// (recursively), or a remote address. A target in a local domain that
// names nobody is dropped.
func (x *expander) expandTarget(target string, depth int, visited map[string]bool, acc *accumulator) {
	t := normalize(target)
	_, domain, ok := split(t)
	if !ok || t == "" {
		return
	}
	if _, local := x.s.domains[domain]; !local {
		// Remote local parts may be case-sensitive (RFC 5321 §2.4): keep
		// the target as written.
		acc.addRemote(strings.TrimSpace(target))
		return
	}
	candidates := [2]string{t, ""}
	if base, ok := stripSubaddress(t); ok {
		candidates[1] = base
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if r, ok := x.s.accounts[c]; ok {
			acc.addAccounts(r.Accounts)
			return
		}
		if _, ok := x.s.disabled[c]; ok {
			return
		}
		if targets, ok := x.raw[c]; ok {
			x.follow(c, targets, depth, visited, acc)
			return
		}
	}
	// No account or alias: the target domain's catch-all, if any.
	catchAll := "@" + domain
	if targets, ok := x.raw[catchAll]; ok {
		x.follow(catchAll, targets, depth, visited, acc)
	}
}

func (x *expander) follow(alias string, targets []string, depth int, visited map[string]bool, acc *accumulator) {
	if visited[alias] || depth >= MaxAliasDepth {
		return
	}
	visited[alias] = true
	x.expandTargets(targets, depth+1, visited, acc)
}

// accumulator collects a deduplicated resolution in first-seen order.
type accumulator struct {
	accounts []int64
	remote   []string
}

func (a *accumulator) addAccounts(ids []int64) {
	for _, id := range ids {
		dup := false
		for _, have := range a.accounts {
			if have == id {
				dup = true
				break
			}
		}
		if !dup {
			a.accounts = append(a.accounts, id)
		}
	}
}

func (a *accumulator) addRemote(addr string) {
	for _, have := range a.remote {
		if strings.EqualFold(have, addr) {
			return
		}
	}
	a.remote = append(a.remote, addr)
}

func (a *accumulator) result() Resolution {
	return Resolution{Accounts: a.accounts, Remote: a.remote}
}
