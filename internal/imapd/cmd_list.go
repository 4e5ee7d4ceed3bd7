package imapd

import (
	"fmt"
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
			case "REMOTE", "RECURSIVEMATCH":
			default:
				return "", "", bad("unknown LIST selection option")
			}
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

// listEntry is one mailbox, existing or only implied by its children.
type listEntry struct {
	name        string
	exists      bool
	subscribed  bool
	special     string
	hasChildren bool
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
	entries := buildEntries(mbs)
	var matchers []string
	for _, p := range patterns {
		if !s.utf8Names() {
			if d, err := imapwire.DecodeMUTF7(p); err == nil {
				p = d
			}
		}
		matchers = append(matchers, canonicalPattern(ref+p))
	}
	for _, e := range entries {
		if opt.subscribedOnly && !e.subscribed {
			continue
		}
		if opt.specialOnly && e.special == "" {
			continue
		}
		matched := false
		for _, m := range matchers {
			if matchPattern(m, e.name) {
				matched = true
				break
			}
		}
		if !matched {
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
	if !e.exists {
		attrs = append(attrs, `\NonExistent`)
		if opt.lsub {
			attrs = []string{`\Noselect`}
		}
	}
	if !opt.lsub {
		if e.hasChildren {
			attrs = append(attrs, `\HasChildren`)
		} else {
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
	s.w.CRLF()
}

// buildEntries sorts the mailboxes and adds the parents that do not exist.
func buildEntries(mbs []store.Mailbox) []listEntry {
	byName := map[string]*listEntry{}
	for _, mb := range mbs {
		byName[mb.Name] = &listEntry{name: mb.Name, exists: true, subscribed: mb.Subscribed, special: mb.SpecialUse}
	}
	for _, mb := range mbs {
		levels := strings.Split(mb.Name, sep)
		for i := 1; i < len(levels); i++ {
			parent := strings.Join(levels[:i], sep)
			p, ok := byName[parent]
			if !ok {
				p = &listEntry{name: parent}
				byName[parent] = p
			}
			p.hasChildren = true
		}
	}
	out := make([]listEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].name == "INBOX") != (out[j].name == "INBOX") {
			return out[i].name == "INBOX"
		}
		return out[i].name < out[j].name
	})
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
