package directory

import (
	"slices"
	"strings"

	"pimail/internal/store"
)

// SendsAs reports whether the account whose address is account may use
// addr as its sender: its own address (also with a +detail), or an alias
// whose targets include it. A catch-all does not count: it receives for
// the domain, it does not send as it. The webmail's identities keep this
// rule; submission's sender check is the same rule.
func SendsAs(account, addr string, aliases []store.Alias) bool {
	a := strings.ToLower(strings.TrimSpace(addr))
	own := strings.ToLower(account)
	local, domain, ok := strings.Cut(a, "@")
	if !ok || strings.Contains(domain, "@") {
		return false
	}
	base := a
	if i := strings.IndexByte(local, '+'); i > 0 {
		base = local[:i] + "@" + domain
	}
	if a == own || base == own {
		return true
	}
	for _, al := range aliases {
		if l := strings.ToLower(al.Address); l != a && l != base {
			continue
		}
		for _, t := range al.Targets {
			if strings.EqualFold(t, own) {
				return true
			}
		}
	}
	return false
}

// SenderAddresses lists the addresses the directory names for an account
// to send as: its own, then the aliases that deliver to it, sorted.
func SenderAddresses(account string, aliases []store.Alias) []string {
	out := []string{strings.ToLower(account)}
	for _, al := range aliases {
		if strings.HasPrefix(al.Address, "@") {
			continue // a catch-all
		}
		for _, t := range al.Targets {
			if strings.EqualFold(t, account) && !strings.EqualFold(al.Address, account) {
				out = append(out, strings.ToLower(al.Address))
				break
			}
		}
	}
	slices.Sort(out[1:])
	return slices.Compact(out)
}
