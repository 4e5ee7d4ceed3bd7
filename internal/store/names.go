package store

// The names and values every implementation accepts and how it stores
// them: mailbox names, keywords, addresses, domains.

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// NormalizeMailboxName validates a mailbox name and returns its stored form:
// "INBOX" in any case becomes "INBOX" (RFC 9051 §5.1: INBOX is
// case-insensitive). Names are UTF-8, without control characters, and the
// hierarchy separator neither starts, ends nor doubles.
func NormalizeMailboxName(name string) (string, error) {
	if strings.EqualFold(name, "INBOX") {
		return "INBOX", nil
	}
	if name == "" || len(name) > 1000 || !utf8.ValidString(name) {
		return "", fmt.Errorf("mailbox name %q: %w", name, ErrInvalid)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("mailbox name %q: control character: %w", name, ErrInvalid)
		}
	}
	sep := HierarchySeparator
	if strings.HasPrefix(name, sep) || strings.HasSuffix(name, sep) || strings.Contains(name, sep+sep) {
		return "", fmt.Errorf("mailbox name %q: empty hierarchy level: %w", name, ErrInvalid)
	}
	return name, nil
}

// ParentNames lists the superior names of a mailbox name, outermost first:
// "a/b/c" → "a", "a/b".
func ParentNames(name string) []string {
	var ps []string
	for i := 0; i < len(name); i++ {
		if strings.HasPrefix(name[i:], HierarchySeparator) {
			ps = append(ps, name[:i])
		}
	}
	return ps
}

// ValidSpecialUse reports whether s is one of the store's special-use values.
func ValidSpecialUse(s string) bool {
	switch s {
	case SpecialNone, SpecialSent, SpecialDrafts, SpecialTrash,
		SpecialJunk, SpecialArchive:
		return true
	}
	return false
}

// NormalizeKeywords validates keywords (IMAP flag-keyword atoms) and returns them
// de-duplicated case-insensitively (RFC 9051 §2.3.2: keywords are
// case-insensitive; the first spelling is kept) and sorted.
func NormalizeKeywords(kws []string) ([]string, error) {
	if len(kws) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(kws))
	for _, k := range kws {
		if k == "" || len(k) > 200 || strings.HasPrefix(k, `\`) {
			return nil, fmt.Errorf("keyword %q: %w", k, ErrInvalid)
		}
		for i := 0; i < len(k); i++ {
			// atom-specials (RFC 9051 §9): ( ) { SP CTL % * " \ ]
			if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`(){%*"\]`, c) >= 0 {
				return nil, fmt.Errorf("keyword %q: %w", k, ErrInvalid)
			}
		}
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, k) }) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// JoinKeywords and SplitKeywords convert to and from the stored form.
func JoinKeywords(kws []string) string { return strings.Join(kws, " ") }

func SplitKeywords(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}

// MergeKeywords applies a flag operation to a keyword list (both normalised).
func MergeKeywords(cur []string, op FlagOp, kws []string) []string {
	has := func(list []string, k string) bool {
		return slices.ContainsFunc(list, func(o string) bool { return strings.EqualFold(o, k) })
	}
	var out []string
	switch op {
	case FlagsReplace:
		out = slices.Clone(kws)
	case FlagsAdd:
		out = slices.Clone(cur)
		for _, k := range kws {
			if !has(out, k) {
				out = append(out, k)
			}
		}
	case FlagsRemove:
		for _, k := range cur {
			if !has(kws, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// AllFlags is every system flag the store knows.
const AllFlags = FlagSeen | FlagAnswered | FlagFlagged | FlagDeleted | FlagDraft

// NormalizeAddress lower-cases an address and checks it has the form local@domain
// (or "@domain" when catchAll is allowed).
func NormalizeAddress(addr string, catchAll bool) (local, domain string, norm string, err error) {
	norm = strings.ToLower(strings.TrimSpace(addr))
	at := strings.LastIndexByte(norm, '@')
	if at < 0 || at == len(norm)-1 || strings.ContainsAny(norm, " \t\r\n<>") {
		return "", "", "", fmt.Errorf("address %q: %w", addr, ErrInvalid)
	}
	local, domain = norm[:at], norm[at+1:]
	if local == "" && !catchAll {
		return "", "", "", fmt.Errorf("address %q: empty local part: %w", addr, ErrInvalid)
	}
	return local, domain, norm, nil
}

// NormalizeDomain lower-cases a domain name and removes a trailing dot.
func NormalizeDomain(name string) (string, error) {
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
	if d == "" || len(d) > 253 || strings.ContainsAny(d, "@ \t\r\n/\\") || strings.Contains(d, "..") {
		return "", fmt.Errorf("domain %q: %w", name, ErrInvalid)
	}
	return d, nil
}

// ChildNameRange returns the bounds [lo, hi) of the names below a mailbox
// in byte order (how both stores compare names): "a/" ≤ child < "a0", because '0'
// follows '/'.
func ChildNameRange(name string) (lo, hi string) {
	sep := HierarchySeparator
	last := sep[len(sep)-1]
	return name + sep, name + sep[:len(sep)-1] + string(rune(last+1))
}

// NormalizeAlias checks an alias (address and targets, see AddAlias) and
// returns its normalised address, domain and targets.
func NormalizeAlias(address string, targets []string) (addr, domain string, norm []string, err error) {
	_, domain, addr, err = NormalizeAddress(address, true)
	if err != nil {
		return "", "", nil, err
	}
	if len(targets) == 0 {
		return "", "", nil, fmt.Errorf("alias %q without targets: %w", addr, ErrInvalid)
	}
	norm = make([]string, 0, len(targets))
	for _, t := range targets {
		_, _, nt, err := NormalizeAddress(t, false)
		if err != nil {
			return "", "", nil, fmt.Errorf("alias %q target: %w", addr, err)
		}
		if nt == addr {
			return "", "", nil, fmt.Errorf("alias %q targets itself: %w", addr, ErrInvalid)
		}
		norm = append(norm, nt)
	}
	return addr, domain, norm, nil
}

// ValidContact checks a card against the bounds of Contact: Href and UID
// 1–255 bytes without line breaks or NUL (and Href without '/'), every
// e-mail address and group likewise, the card and its name at most
// MaxContactSize.
func ValidContact(c Contact) bool {
	ok := func(s string) bool { return s != "" && len(s) <= 255 && !strings.ContainsAny(s, "\x00\r\n") }
	for _, l := range [][]string{c.Emails, c.Groups} {
		for _, v := range l {
			if !ok(v) {
				return false
			}
		}
	}
	return ok(c.Href) && !strings.Contains(c.Href, "/") && ok(c.UID) && len(c.Card) <= MaxContactSize &&
		len(c.Name) <= MaxContactSize && !strings.ContainsRune(c.Name, 0)
}

// ValidIdentity checks an identity against the bounds of Identity: an
// address that is not blank, no field over MaxIdentityField, no negative
// ID.
func ValidIdentity(id Identity) bool {
	return strings.TrimSpace(id.Address) != "" && len(id.Address) <= MaxIdentityField && len(id.Name) <= MaxIdentityField &&
		len(id.Signature) <= MaxIdentityField && id.ID >= 0
}

// MaxSessionClient bounds Session.Client.
const MaxSessionClient = 200

// CutSessionClient shortens a session's Client to MaxSessionClient bytes
// without splitting a character.
func CutSessionClient(s string) string { return Clip(s, MaxSessionClient) }

// Clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Bounds on what one delivery log entry keeps in a store: the log is for
// reading by an administrator, and every field may come from a hostile
// peer.
const (
	MaxLogField  = 512  // addresses, message ids, IPs, subjects
	MaxLogReason = 2000 // SMTP replies and verdicts
)

// NormMessageID strips spaces and the angle brackets of a Message-ID, as
// the delivery log keeps and searches it.
func NormMessageID(id string) string {
	id = strings.TrimSpace(id)
	id = strings.TrimPrefix(id, "<")
	return strings.TrimSuffix(id, ">")
}

// LikeEscaper escapes the wildcards of SQL's LIKE (with backslash as its
// escape character).
var LikeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
