package imapd

import (
	"sort"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// systemFlags maps the RFC 9051 §2.3.2 system flags to the store's bits.
var systemFlags = []struct {
	name string
	bit  store.Flags
}{
	{`\Seen`, store.FlagSeen},
	{`\Answered`, store.FlagAnswered},
	{`\Flagged`, store.FlagFlagged},
	{`\Deleted`, store.FlagDeleted},
	{`\Draft`, store.FlagDraft},
}

// writeFlags writes a flag list (appendFlags).
func (s *session) writeFlags(f msgFlags, recent bool) {
	s.w.Bytes(s.appendFlags(s.w.AvailableBuffer(), f, recent))
}

// validKeyword reports whether k is a flag-keyword atom (RFC 9051 §9).
func validKeyword(k string) bool {
	if k == "" || len(k) > 200 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`(){%*"\]`, c) >= 0 {
			return false
		}
	}
	return true
}

// parseFlagList parses flags from a list argument or, leniently, from
// bare flag atoms (RFC 3501 STORE allows "+FLAGS \Seen"). \Recent is
// ignored: it cannot be set by clients.
func parseFlagList(args []imapwire.Arg) (store.Flags, []string, error) {
	var items []imapwire.Arg
	if len(args) == 1 && args[0].Kind == imapwire.KindList {
		items = args[0].List
	} else {
		items = args
	}
	var flags store.Flags
	var kws []string
	seen := map[string]bool{}
	for _, a := range items {
		if a.Kind != imapwire.KindAtom {
			return 0, nil, bad("flags must be atoms")
		}
		name := a.Str
		if strings.HasPrefix(name, `\`) {
			found := false
			for _, sf := range systemFlags {
				if strings.EqualFold(sf.name, name) {
					flags |= sf.bit
					found = true
				}
			}
			if !found && !strings.EqualFold(name, `\Recent`) {
				return 0, nil, bad("unknown system flag %s", name)
			}
			continue
		}
		if !validKeyword(name) {
			return 0, nil, bad("invalid keyword")
		}
		if l := strings.ToLower(name); !seen[l] {
			seen[l] = true
			kws = append(kws, name)
		}
	}
	sort.Strings(kws)
	return flags, kws, nil
}

// mailboxKeywords lists the keywords used in the view, for FLAGS.
func (v *mailboxView) keywords() []string {
	set := map[string]bool{}
	for _, f := range v.flags {
		for _, k := range f.keywords {
			if validKeyword(k) {
				set[k] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// writeMailboxFlags writes the FLAGS and PERMANENTFLAGS responses of the
// selected mailbox (RFC 9051 §7.3.5, §7.1): the system flags and every
// keyword announced so far, which a read-write mailbox lets clients set
// along with new ones (\*).
func (s *session) writeMailboxFlags() {
	v := s.sel
	kws := make([]string, 0, len(v.announced))
	for k := range v.announced {
		kws = append(kws, k)
	}
	sort.Strings(kws)
	w := s.w
	w.Raw(`* FLAGS (\Answered \Flagged \Deleted \Seen \Draft`)
	for _, k := range kws {
		w.SP().Raw(k)
	}
	w.Raw(")").CRLF()
	if v.readOnly {
		w.Untagged("OK [PERMANENTFLAGS ()] No permanent flags permitted")
		return
	}
	w.Raw(`* OK [PERMANENTFLAGS (\Answered \Flagged \Deleted \Seen \Draft`)
	for _, k := range kws {
		w.SP().Raw(k)
	}
	w.Raw(` \*)] Flags permitted`).CRLF()
}

// announceKeywords sends FLAGS and PERMANENTFLAGS again when a message
// of the view carries a keyword the last FLAGS did not list, before the
// response that shows it (RFC 3501 §7.2.6, RFC 9051 §7.3.5: FLAGS lists
// the flags applicable to the mailbox).
func (s *session) announceKeywords(kws []string) {
	v := s.sel
	fresh := false
	for _, k := range kws {
		if !v.announced[k] && validKeyword(k) {
			v.announced[k] = true
			fresh = true
		}
	}
	if fresh {
		s.writeMailboxFlags()
	}
}
