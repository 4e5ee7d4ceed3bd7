package msgauth

import (
	"net/mail"
	"strings"
)

// maxFromDomains bounds how many distinct author domains of one message
// are evaluated.
const maxFromDomains = 3

// fromDomains returns the distinct domains of the RFC5322.From addresses
// (RFC 7489 §6.6.1), lower case, at most maxFromDomains. A message
// normally has one From field with one address; one with several From
// fields or addresses gets each of its domains evaluated, so that adding a
// second author cannot hide a failing one. An address that does not parse
// is read leniently: the text after its last "@".
func fromDomains(raw []byte) []string {
	var out []string
	add := func(d string) {
		d = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
		if d == "" || len(out) == maxFromDomains {
			return
		}
		for _, have := range out {
			if have == d {
				return
			}
		}
		out = append(out, d)
	}
	for _, f := range headerFields(raw) {
		if !strings.EqualFold(f.name, "From") {
			continue
		}
		list, err := mail.ParseAddressList(f.value)
		if err == nil {
			for _, a := range list {
				_, d := splitAddr(a.Address)
				add(d)
			}
			continue
		}
		add(lenientDomain(f.value))
	}
	return out
}

// lenientDomain finds the domain of a From value that net/mail rejects:
// the last "@" and what follows up to a delimiter.
func lenientDomain(v string) string {
	i := strings.LastIndexByte(v, '@')
	if i < 0 {
		return ""
	}
	d := v[i+1:]
	if j := strings.IndexAny(d, "> \t;,()\"'"); j >= 0 {
		d = d[:j]
	}
	if !validDomain(strings.ToLower(strings.TrimSuffix(d, "."))) {
		return ""
	}
	return d
}
