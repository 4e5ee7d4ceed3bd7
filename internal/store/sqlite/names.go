package sqlite

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"pimail/internal/store"
)

// normMailboxName validates a mailbox name and returns its stored form:
// "INBOX" in any case becomes "INBOX" (RFC 9051 §5.1: INBOX is
// case-insensitive). Names are UTF-8, without control characters, and the
// hierarchy separator neither starts, ends nor doubles.
func normMailboxName(name string) (string, error) {
	if strings.EqualFold(name, "INBOX") {
		return "INBOX", nil
	}
	if name == "" || len(name) > 1000 || !utf8.ValidString(name) {
		return "", fmt.Errorf("mailbox name %q: %w", name, store.ErrInvalid)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("mailbox name %q: control character: %w", name, store.ErrInvalid)
		}
	}
	sep := store.HierarchySeparator
	if strings.HasPrefix(name, sep) || strings.HasSuffix(name, sep) || strings.Contains(name, sep+sep) {
		return "", fmt.Errorf("mailbox name %q: empty hierarchy level: %w", name, store.ErrInvalid)
	}
	return name, nil
}

// parentNames lists the superior names of a mailbox name, outermost first:
// "a/b/c" → "a", "a/b".
func parentNames(name string) []string {
	var ps []string
	for i := 0; i < len(name); i++ {
		if strings.HasPrefix(name[i:], store.HierarchySeparator) {
			ps = append(ps, name[:i])
		}
	}
	return ps
}

// validSpecialUse reports whether s is one of the store's special-use values.
func validSpecialUse(s string) bool {
	switch s {
	case store.SpecialNone, store.SpecialSent, store.SpecialDrafts, store.SpecialTrash,
		store.SpecialJunk, store.SpecialArchive:
		return true
	}
	return false
}

// normKeywords validates keywords (IMAP flag-keyword atoms) and returns them
// de-duplicated case-insensitively (RFC 9051 §2.3.2: keywords are
// case-insensitive; the first spelling is kept) and sorted.
func normKeywords(kws []string) ([]string, error) {
	if len(kws) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(kws))
	for _, k := range kws {
		if k == "" || len(k) > 200 || strings.HasPrefix(k, `\`) {
			return nil, fmt.Errorf("keyword %q: %w", k, store.ErrInvalid)
		}
		for i := 0; i < len(k); i++ {
			// atom-specials (RFC 9051 §9): ( ) { SP CTL % * " \ ]
			if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`(){%*"\]`, c) >= 0 {
				return nil, fmt.Errorf("keyword %q: %w", k, store.ErrInvalid)
			}
		}
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, k) }) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// joinKeywords and splitKeywords convert to and from the stored form.
func joinKeywords(kws []string) string { return strings.Join(kws, " ") }

func splitKeywords(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}

// mergeKeywords applies a flag operation to a keyword list (both normalised).
func mergeKeywords(cur []string, op store.FlagOp, kws []string) []string {
	has := func(list []string, k string) bool {
		return slices.ContainsFunc(list, func(o string) bool { return strings.EqualFold(o, k) })
	}
	var out []string
	switch op {
	case store.FlagsReplace:
		out = slices.Clone(kws)
	case store.FlagsAdd:
		out = slices.Clone(cur)
		for _, k := range kws {
			if !has(out, k) {
				out = append(out, k)
			}
		}
	case store.FlagsRemove:
		for _, k := range cur {
			if !has(kws, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// allFlags is every system flag the store knows.
const allFlags = store.FlagSeen | store.FlagAnswered | store.FlagFlagged | store.FlagDeleted | store.FlagDraft

// normAddress lower-cases an address and checks it has the form local@domain
// (or "@domain" when catchAll is allowed).
func normAddress(addr string, catchAll bool) (local, domain string, norm string, err error) {
	norm = strings.ToLower(strings.TrimSpace(addr))
	at := strings.LastIndexByte(norm, '@')
	if at < 0 || at == len(norm)-1 || strings.ContainsAny(norm, " \t\r\n<>") {
		return "", "", "", fmt.Errorf("address %q: %w", addr, store.ErrInvalid)
	}
	local, domain = norm[:at], norm[at+1:]
	if local == "" && !catchAll {
		return "", "", "", fmt.Errorf("address %q: empty local part: %w", addr, store.ErrInvalid)
	}
	return local, domain, norm, nil
}

// normDomain lower-cases a domain name and removes a trailing dot.
func normDomain(name string) (string, error) {
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
	if d == "" || len(d) > 253 || strings.ContainsAny(d, "@ \t\r\n/\\") || strings.Contains(d, "..") {
		return "", fmt.Errorf("domain %q: %w", name, store.ErrInvalid)
	}
	return d, nil
}

// uidSetSQL returns an SQL condition on column col for a UID set and its
// arguments. An empty set matches everything. Large sets fall back to a range
// covering them; callers filter the rows with UIDSet.Contains as well.
func uidSetSQL(col string, uids store.UIDSet) (string, []any) {
	if len(uids) == 0 {
		return "1", nil
	}
	if len(uids) > 32 {
		lo, hi := uint32(0xffffffff), uint32(0)
		for _, r := range uids {
			a, b := r.Start, r.Stop
			if b != 0 && b < a {
				a, b = b, a
			}
			lo = min(lo, a)
			if b == 0 {
				return col + " >= ?", []any{lo}
			}
			hi = max(hi, b)
		}
		return col + " BETWEEN ? AND ?", []any{lo, hi}
	}
	var sb strings.Builder
	var args []any
	sb.WriteString("(")
	for i, r := range uids {
		if i > 0 {
			sb.WriteString(" OR ")
		}
		a, b := r.Start, r.Stop
		if b != 0 && b < a {
			a, b = b, a
		}
		if b == 0 {
			sb.WriteString(col + " >= ?")
			args = append(args, a)
		} else {
			sb.WriteString(col + " BETWEEN ? AND ?")
			args = append(args, a, b)
		}
	}
	sb.WriteString(")")
	return sb.String(), args
}

// inSet is UIDSet.Contains that also accepts reversed ranges (Start > Stop),
// as IMAP sequence sets allow ("5:2").
func inSet(uids store.UIDSet, uid uint32) bool {
	if len(uids) == 0 {
		return true
	}
	for _, r := range uids {
		a, b := r.Start, r.Stop
		if b != 0 && b < a {
			a, b = b, a
		}
		if uid >= a && (b == 0 || uid <= b) {
			return true
		}
	}
	return false
}
