package imapd

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// listOptions are the LIST-EXTENDED selection and return options (RFC 5258,
// RFC 9051 §6.3.9) that pimail implements.
type listOptions struct {
	subscribedOnly bool // selection SUBSCRIBED
	specialOnly    bool // selection SPECIAL-USE (RFC 6154 §5.1)
	recursive      bool // selection RECURSIVEMATCH (RFC 5258 §3.1)
	retSubscribed  bool
	status         []string // RETURN (STATUS (...)) (RFC 5819)
	lsub           bool
}

// cmdList implements LIST (RFC 9051 §6.3.9).
func cmdList(s *session, cmd *command) (string, string, error) {
	args := cmd.args
	var opt listOptions
	if len(args) > 0 && args[0].Kind == imapwire.KindList {
		for _, o := range args[0].List {
			switch upperASCII(o.Str) {
			case "SUBSCRIBED":
				opt.subscribedOnly, opt.retSubscribed = true, true
			case "SPECIAL-USE":
				opt.specialOnly = true
			case "RECURSIVEMATCH":
				opt.recursive = true
			case "REMOTE":
			default:
				return "", "", bad("unknown LIST selection option")
			}
		}
		// RFC 5258 §3.1: RECURSIVEMATCH needs another selection option
		// that is not REMOTE. Only SUBSCRIBED changes what it returns.
		if opt.recursive && !opt.subscribedOnly && !opt.specialOnly {
			return "", "", bad("RECURSIVEMATCH needs another selection option")
		}
		args = args[1:]
	}
	if len(args) != 2 && len(args) != 4 {
		return "", "", bad("LIST needs a reference and a pattern")
	}
	if len(args) == 4 {
		if args[2].Kind != imapwire.KindAtom || upperASCII(args[2].Str) != "RETURN" || args[3].Kind != imapwire.KindList {
			return "", "", bad("invalid LIST return options")
		}
		ret := args[3].List
		for i := 0; i < len(ret); i++ {
			switch upperASCII(ret[i].Str) {
			case "SUBSCRIBED":
				opt.retSubscribed = true
			case "CHILDREN", "SPECIAL-USE":
			case "STATUS":
				if i+1 >= len(ret) {
					return "", "", bad("STATUS needs items")
				}
				items, err := parseStatusItems(ret[i+1])
				if err != nil {
					return "", "", err
				}
				opt.status = items
				i++
			default:
				return "", "", bad("unknown LIST return option")
			}
		}
	}
	ref, ok := args[0].AString()
	if !ok {
		return "", "", bad("invalid reference")
	}
	var patterns []string
	if args[1].Kind == imapwire.KindList {
		for _, p := range args[1].List {
			ps, ok := p.AString()
			if !ok {
				return "", "", bad("invalid pattern")
			}
			patterns = append(patterns, ps)
		}
	} else {
		ps, _ := args[1].AString()
		patterns = []string{ps}
	}
	return "", "", s.list(ref, patterns, opt)
}

// cmdLsub implements LSUB (RFC 3501 §6.3.9).
func cmdLsub(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 2 {
		return "", "", bad("LSUB needs a reference and a pattern")
	}
	ref, ok1 := cmd.args[0].AString()
	pat, ok2 := cmd.args[1].AString()
	if !ok1 || !ok2 {
		return "", "", bad("invalid LSUB arguments")
	}
	return "", "", s.list(ref, []string{pat}, listOptions{subscribedOnly: true, lsub: true})
}

// listEntry is one name a LIST or LSUB response may show.
type listEntry struct {
	name        string
	exists      bool
	subscribed  bool
	special     string
	hasChildren bool // an existing mailbox below it
	// childInfo: not selected itself, but listed because a subscribed
	// name below it that the patterns miss (RECURSIVEMATCH, RFC 5258
	// §3.5); for LSUB, the \Noselect parent of such a name (RFC 3501
	// §6.3.9).
	childInfo bool
}

func (s *session) list(ref string, patterns []string, opt listOptions) error {
	if !s.utf8Names() {
		if d, err := imapwire.DecodeMUTF7(ref); err == nil {
			ref = d
		}
	}
	// RFC 9051 §6.3.9: LIST "" "" returns the delimiter and root.
	if len(patterns) == 1 && patterns[0] == "" {
		if opt.lsub {
			return nil
		}
		s.w.Untagged(`LIST (\Noselect) "/" ""`)
		return nil
	}
	mbs, err := s.srv.st.Mailboxes(s.ctx, s.acct.ID)
	if err != nil {
		return fmt.Errorf("listing mailboxes: %w", err)
	}
	var subs []string
	if opt.subscribedOnly || opt.retSubscribed {
		if subs, err = s.srv.st.Subscriptions(s.ctx, s.acct.ID); err != nil {
			return fmt.Errorf("listing subscriptions: %w", err)
		}
	}
	var matchers []string
	for _, p := range patterns {
		if !s.utf8Names() {
			if d, err := imapwire.DecodeMUTF7(p); err == nil {
				p = d
			}
		}
		matchers = append(matchers, canonicalPattern(ref+p))
	}
	matches := func(name string) bool {
		for _, m := range matchers {
			if matchPattern(m, name) {
				return true
			}
		}
		return false
	}
	percent := slices.ContainsFunc(patterns, func(p string) bool { return strings.Contains(p, "%") })
	for _, e := range buildEntries(mbs, subs, opt, matches, percent) {
		if opt.specialOnly && e.special == "" {
			continue
		}
		s.writeListEntry(e, opt)
		if len(opt.status) > 0 && e.exists {
			if err := s.writeStatus(e.name, opt.status); err != nil {
				if _, isResp := err.(*respError); !isResp {
					return err
				}
			}
		}
	}
	return nil
}

func (s *session) writeListEntry(e listEntry, opt listOptions) {
	var attrs []string
	switch {
	case opt.lsub:
		if !e.exists || e.childInfo {
			attrs = append(attrs, `\Noselect`)
		}
	default:
		if !e.exists {
			attrs = append(attrs, `\NonExistent`)
		}
		if e.hasChildren {
			attrs = append(attrs, `\HasChildren`)
		} else if e.exists {
			attrs = append(attrs, `\HasNoChildren`)
		}
		if opt.retSubscribed && e.subscribed {
			attrs = append(attrs, `\Subscribed`)
		}
		if e.special != "" {
			attrs = append(attrs, e.special)
		}
	}
	if opt.lsub {
		s.w.Raw("* LSUB (")
	} else {
		s.w.Raw("* LIST (")
	}
	s.w.Raw(strings.Join(attrs, " ")).Raw(`) "/" `)
	s.writeName(e.name)
	if e.childInfo && !opt.lsub {
		s.w.Raw(` ("CHILDINFO" ("SUBSCRIBED"))`)
	}
	s.w.CRLF()
}

// buildEntries returns the names a LIST or LSUB answers, sorted (INBOX
// first): without the SUBSCRIBED selection, every mailbox and the parents
// of mailboxes that match; with it, every subscribed name that matches
// (existing or not, RFC 3501 §6.3.6, RFC 5258 §3.1) and the names
// RECURSIVEMATCH or LSUB's "%" add for subscribed names below them.
func buildEntries(mbs []store.Mailbox, subs []string, opt listOptions, matches func(string) bool, percent bool) []listEntry {
	byName := map[string]*listEntry{}
	entry := func(name string) *listEntry {
		e, ok := byName[name]
		if !ok {
			e = &listEntry{name: name}
			byName[name] = e
		}
		return e
	}
	for _, mb := range mbs {
		e := entry(mb.Name)
		e.exists, e.special = true, mb.SpecialUse
	}
	for _, mb := range mbs {
		for _, parent := range parentsOf(mb.Name) {
			entry(parent).hasChildren = true
		}
	}
	for _, n := range subs {
		entry(n).subscribed = true
	}
	var out []listEntry
	for _, e := range byName {
		switch {
		case !matches(e.name):
			continue
		case opt.subscribedOnly && !e.subscribed:
			continue
		case !opt.subscribedOnly && !e.exists && !e.hasChildren:
			continue // a subscription alone is no mailbox
		}
		out = append(out, *e)
	}
	if opt.subscribedOnly && (opt.recursive || opt.lsub && percent) {
		// A subscribed name the patterns miss shows its matching
		// ancestors; for LSUB only where "%" stopped at a level.
		extra := map[string]bool{}
		for _, n := range subs {
			if matches(n) {
				continue
			}
			for _, p := range parentsOf(n) {
				if !matches(p) || extra[p] {
					continue
				}
				e := byName[p]
				if e == nil {
					e = &listEntry{name: p}
				}
				if opt.lsub && e.subscribed {
					continue
				}
				extra[p] = true
				if e.subscribed {
					for i := range out {
						if out[i].name == p {
							out[i].childInfo = true
						}
					}
					continue
				}
				c := *e
				c.childInfo = true
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].name == "INBOX") != (out[j].name == "INBOX") {
			return out[i].name == "INBOX"
		}
		return out[i].name < out[j].name
	})
	return out
}

// parentsOf lists the superior names of a mailbox name: "a/b/c" → "a", "a/b".
func parentsOf(name string) []string {
	var out []string
	for i := 0; i < len(name); i++ {
		if name[i] == sep[0] {
			out = append(out, name[:i])
		}
	}
	return out
}

// canonicalPattern makes an INBOX prefix of a pattern match case-insensitively.
func canonicalPattern(p string) string {
	if len(p) >= 5 && strings.EqualFold(p[:5], "INBOX") && (len(p) == 5 || p[5:6] == sep) {
		return "INBOX" + p[5:]
	}
	return p
}

// matchPattern matches a LIST pattern: "*" matches anything, "%" anything
// but the hierarchy separator (RFC 9051 §6.3.9). Dynamic programming keeps
// it linear in len(pattern)*len(name) whatever the pattern.
func matchPattern(pattern, name string) bool {
	if len(pattern) > 1000 {
		return false
	}
	// prev[j]: pattern[:i] matches name[:j].
	prev := make([]bool, len(name)+1)
	cur := make([]bool, len(name)+1)
	prev[0] = true
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		cur[0] = prev[0] && (c == '*' || c == '%')
		for j := 1; j <= len(name); j++ {
			switch c {
			case '*':
				cur[j] = prev[j] || cur[j-1]
			case '%':
				cur[j] = prev[j] || (cur[j-1] && name[j-1] != sep[0])
			default:
				cur[j] = prev[j-1] && name[j-1] == c
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(name)]
}
