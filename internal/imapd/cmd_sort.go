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

// firstAddress is the first real address of a list (group markers skipped).
func firstAddress(list []message.Address) (message.Address, bool) {
	for _, a := range list {
		if a.Group == "" && !a.End {
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
		name = a.Mailbox + "@" + a.Host
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
// DISPLAYFROM and DISPLAYTO keys (RFC 5957).
func cmdSort(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) < 3 {
		return "", "", bad("SORT needs criteria, a charset and search keys")
	}
	keys, err := imapwire.ParseSortCriteria(cmd.args[0])
	if err != nil {
		return "", "", bad("invalid sort criteria")
	}
	sc, err := imapwire.ParseCharsetSearch(cmd.args[1:])
	if err != nil {
		return "", "", bad("%s", err.Error())
	}
	if err := checkCharset(sc.Charset); err != nil {
		return "", "", err
	}
	hits, _, err := s.search(sc.Key)
	if err != nil {
		return "", "", err
	}
	items, err := s.loadSortItems(hits)
	if err != nil {
		return "", "", err
	}
	sortItems(items, keys)
	s.w.Raw("* SORT")
	for _, it := range items {
		s.w.SP().Number(uint64(s.msgNumber(it.idx, cmd.uid)))
	}
	s.w.CRLF()
	return "", "", nil
}

// msgNumber is the UID or the sequence number of view index i.
func (s *session) msgNumber(i int, uid bool) uint32 {
	if uid {
		return s.sel.uids[i]
	}
	return uint32(i + 1)
}
