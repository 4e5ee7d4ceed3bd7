package imapd

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/mailthread"
	"pimail/internal/message"
	"pimail/internal/store"
)

// sortItem is one matching message with the values SORT and THREAD
// compare, all taken from the index (never from the message bytes).
type sortItem struct {
	idx  int // view index: the final tie-break (RFC 5256 §3)
	meta store.MessageMeta
	sent time.Time // Date:, or INTERNALDATE when missing (RFC 5256 §2.2)
	keys []string  // string sort keys, one per criterion (unused slots empty)
	base string    // base subject (RFC 5256 §2.1), for SUBJECT
}

// loadSortItems fetches the parsed index data of the given view indexes.
func (s *session) loadSortItems(hits []int) ([]sortItem, error) {
	v := s.sel
	items := make([]sortItem, 0, len(hits))
	for start := 0; start < len(hits); start += searchChunk {
		chunk := hits[start:min(start+searchChunk, len(hits))]
		metas, err := s.srv.st.Fetch(s.ctx, v.mb.ID, v.uidSet(chunk), store.FetchOptions{Parsed: true})
		if err != nil {
			return nil, fmt.Errorf("sort fetch: %w", err)
		}
		byUID := make(map[uint32]int, len(metas))
		for i := range metas {
			byUID[metas[i].UID] = i
		}
		for _, i := range chunk {
			j, ok := byUID[v.uids[i]]
			if !ok {
				continue // expunged meanwhile
			}
			m := metas[j]
			if m.Parsed == nil {
				m.Parsed = &message.Parsed{}
			}
			it := sortItem{idx: i, meta: m, sent: m.Parsed.Date}
			if it.sent.IsZero() {
				it.sent = m.InternalDate
			}
			it.base, _ = mailthread.BaseSubject(subjectOf(m.Parsed))
			items = append(items, it)
		}
	}
	return items, nil
}

// firstAddress is the first entry of an address list. A group counts
// with its name as the mailbox and display name, as Dovecot sorts it
// (RFC 5256 and RFC 5957 say nothing of groups; imaptest's sort-addresses
// and sort-display-to expect this).
func firstAddress(list []message.Address) (message.Address, bool) {
	for _, a := range list {
		switch {
		case a.Group != "":
			return message.Address{Name: a.Group, Mailbox: a.Group}, true
		case !a.End:
			return a, true
		}
	}
	return message.Address{}, false
}

// mailboxKey is the addr-mailbox of the first address (RFC 5256 §3).
func mailboxKey(list []message.Address) string {
	a, _ := firstAddress(list)
	return mailthread.FoldASCII(message.DecodeHeaderValue(a.Mailbox))
}

// displayKey is the decoded display name of the first address, or its
// addr-spec when it has none (RFC 5957 §3).
func displayKey(list []message.Address) string {
	a, ok := firstAddress(list)
	if !ok {
		return ""
	}
	name := strings.TrimSpace(message.DecodeHeaderValue(a.Name))
	if name == "" {
		name = a.Mailbox
		if a.Host != "" {
			name += "@" + a.Host
		}
	}
	return strings.ToLower(name)
}

// sortItems orders items by the criteria; equal items stay in mailbox
// order (RFC 5256 §3).
func sortItems(items []sortItem, keys []imapwire.SortKey) {
	for i := range items {
		it := &items[i]
		env := &it.meta.Parsed.Envelope
		it.keys = make([]string, len(keys))
		for k, key := range keys {
			switch key.Name {
			case "FROM":
				it.keys[k] = mailboxKey(env.From)
			case "TO":
				it.keys[k] = mailboxKey(env.To)
			case "CC":
				it.keys[k] = mailboxKey(env.Cc)
			case "SUBJECT":
				it.keys[k] = mailthread.FoldASCII(it.base)
			case "DISPLAYFROM":
				it.keys[k] = displayKey(env.From)
			case "DISPLAYTO":
				it.keys[k] = displayKey(env.To)
			}
		}
	}
	slices.SortStableFunc(items, func(a, b sortItem) int {
		for k, key := range keys {
			var c int
			switch key.Name {
			case "ARRIVAL":
				c = a.meta.InternalDate.Compare(b.meta.InternalDate)
			case "DATE":
				c = a.sent.Compare(b.sent)
			case "SIZE":
				c = cmp.Compare(a.meta.Size, b.meta.Size)
			default:
				c = strings.Compare(a.keys[k], b.keys[k])
			}
			if key.Reverse {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return cmp.Compare(a.idx, b.idx)
	})
}

// cmdSort implements SORT and UID SORT (RFC 5256 §3) with the
// DISPLAYFROM and DISPLAYTO keys (RFC 5957), and RETURN (ESORT, RFC 5267
// §3, with PARTIAL and UPDATE of CONTEXT=SORT, §4), answered in ESEARCH.
func cmdSort(s *session, cmd *command) (string, string, error) {
	args := cmd.args
	var ret []string
	var partial imapwire.PartialRange
	hasReturn := len(args) > 0 && args[0].Kind == imapwire.KindAtom && upperASCII(args[0].Str) == "RETURN"
	if hasReturn {
		if len(args) < 2 {
			return "", "", bad("RETURN needs a list")
		}
		var err error
		if ret, partial, err = imapwire.ParseReturnOptions(args[1]); err != nil || slices.Contains(ret, "SAVE") {
			return "", "", bad("invalid SORT return options")
		}
		args = args[2:]
	}
	if len(args) < 3 {
		return "", "", bad("SORT needs criteria, a charset and search keys")
	}
	keys, err := imapwire.ParseSortCriteria(args[0])
	if err != nil {
		return "", "", bad("invalid sort criteria")
	}
	sc, err := imapwire.ParseCharsetSearch(args[1:])
	if err != nil {
		return "", "", bad("%s", err.Error())
	}
	if err := checkCharset(sc.Charset); err != nil {
		return "", "", err
	}
	res, err := s.search(sc.Key)
	if err != nil {
		return "", "", err
	}
	if res, err = s.sortResult(res, keys); err != nil {
		return "", "", err
	}
	if !hasReturn {
		s.w.Raw("* SORT")
		for _, i := range res.idx {
			s.w.SP().Number(uint64(s.msgNumber(i, cmd.uid)))
		}
		s.w.CRLF()
		return "", "", nil
	}
	s.writeESearch(cmd, ret, partial, res)
	if slices.Contains(ret, "UPDATE") {
		return s.addContext(cmd, sc.Key, keys, res), "", nil
	}
	return "", "", nil
}

// sortResult puts a search result into the order of the sort keys.
func (s *session) sortResult(res searchResult, keys []imapwire.SortKey) (searchResult, error) {
	items, err := s.loadSortItems(res.idx)
	if err != nil {
		return searchResult{}, err
	}
	sortItems(items, keys)
	out := searchResult{idx: make([]int, len(items)), modseqs: make([]uint64, len(items)), usesModSeq: res.usesModSeq}
	for n, it := range items {
		out.idx[n], out.modseqs[n] = it.idx, it.meta.ModSeq
	}
	return out, nil
}

// msgNumber is the UID or the sequence number of view index i.
func (s *session) msgNumber(i int, uid bool) uint32 {
	if uid {
		return s.sel.uids[i]
	}
	return uint32(i + 1)
}
