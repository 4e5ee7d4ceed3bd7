package imapd

import (
	"fmt"
	"slices"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

const searchChunk = 1000

// cmdSearch implements SEARCH and UID SEARCH (RFC 9051 §6.4.4): the SEARCH
// response for IMAP4rev1 sessions, ESEARCH (RFC 4731, RFC 9051 §7.3.4) for
// IMAP4rev2 sessions and whenever RETURN is given.
func cmdSearch(s *session, cmd *command) (code, text string, err error) {
	sc, err := imapwire.ParseSearch(cmd.args)
	if err != nil {
		return "", "", bad("%s", err.Error())
	}
	v := s.sel
	save := slices.Contains(sc.Return, "SAVE")
	if save {
		// RFC 5182 §2.1: a failed SEARCH leaves "$" empty; the old
		// value stays usable by this search's own keys.
		defer func() {
			if err != nil {
				v.saved = nil
			}
		}()
	}
	if err := checkCharset(sc.Charset); err != nil {
		return "", "", err
	}
	hits, ev, err := s.search(sc.Key)
	if err != nil {
		return "", "", err
	}
	nums := make([]uint32, len(hits))
	for i, x := range hits {
		if cmd.uid {
			nums[i] = v.uids[x]
		} else {
			nums[i] = uint32(x + 1)
		}
	}
	var modseq uint64
	if ev.usesModSeq && len(nums) > 0 {
		modseq = ev.maxModSeq
	}
	ret := sc.Return
	if save {
		v.saveResult(hits, ret)
		ret = slices.DeleteFunc(slices.Clone(ret), func(r string) bool { return r == "SAVE" })
		if len(ret) == 0 {
			// RFC 5182 §2.4: SAVE alone produces no ESEARCH response.
			return "", "", nil
		}
	}
	if s.rev2 || sc.HasReturn {
		s.writeESearch(cmd, ret, nums, modseq)
	} else {
		s.w.Raw("* SEARCH")
		for _, n := range nums {
			s.w.SP().Number(uint64(n))
		}
		if modseq > 0 {
			// RFC 7162 §3.1.6: "* SEARCH 2 5 (MODSEQ 917162500)".
			s.w.Raw(" (MODSEQ ").Number(modseq).Byte(')')
		}
		s.w.CRLF()
	}
	return "", "", nil
}

// writeESearch writes "* ESEARCH (TAG "t") [UID] MIN.. MAX.. COUNT.. ALL.."
// (RFC 4731 §3.1); no RETURN options, or an empty list, mean ALL. A
// non-zero modseq adds "MODSEQ n" (RFC 7162 §3.1.9).
func (s *session) writeESearch(cmd *command, ret []string, nums []uint32, modseq uint64) {
	if len(ret) == 0 {
		ret = []string{"ALL"}
	}
	w := s.w
	w.Raw("* ESEARCH (TAG ").String(cmd.tag).Byte(')')
	if cmd.uid {
		w.Raw(" UID")
	}
	done := map[string]bool{}
	for _, r := range ret {
		if done[r] {
			continue // each return data item once (RFC 4731 §3.1)
		}
		done[r] = true
		switch r {
		case "MIN":
			if len(nums) > 0 {
				w.Raw(" MIN ").Number(uint64(nums[0]))
			}
		case "MAX":
			if len(nums) > 0 {
				w.Raw(" MAX ").Number(uint64(nums[len(nums)-1]))
			}
		case "COUNT":
			w.Raw(" COUNT ").Int(int64(len(nums)))
		case "ALL":
			if len(nums) > 0 {
				w.Raw(" ALL ").Raw(imapwire.FormatUIDs(nums))
			}
		}
	}
	if modseq > 0 {
		w.Raw(" MODSEQ ").Number(modseq)
	}
	w.CRLF()
}

// search runs a search program over the whole view and returns the
// ascending view indexes of the matches.
func (s *session) search(key imapwire.SearchKey) ([]int, *evaluator, error) {
	v := s.sel
	ev := &evaluator{}
	ev.init(s, key)
	if ev.usesModSeq {
		s.enableCondStore() // RFC 7162 §3.1: a CONDSTORE enabling command
	}
	var hits []int
	for start := 0; start < len(v.uids); start += searchChunk {
		idx := make([]int, 0, searchChunk)
		for i := start; i < min(start+searchChunk, len(v.uids)); i++ {
			idx = append(idx, i)
		}
		found, err := ev.run(idx)
		if err != nil {
			return nil, nil, err
		}
		hits = append(hits, found...)
	}
	return hits, ev, nil
}

// checkCharset accepts the charsets search strings may come in.
func checkCharset(cs string) error {
	if cs != "" && !strings.EqualFold(cs, "UTF-8") && !strings.EqualFold(cs, "US-ASCII") {
		return no("BADCHARSET (UTF-8 US-ASCII)", "unsupported charset")
	}
	return nil
}

// evaluator runs a search program over view messages.
type evaluator struct {
	s      *session
	key    imapwire.SearchKey
	parsed bool // needs the envelope and MIME structure
	blob   bool // needs the message bytes (HEADER, BODY, TEXT)
	meta   bool // needs dates or sizes from the index
	// usesModSeq: the program has a MODSEQ key, so the answer carries the
	// highest MODSEQ of the matches (RFC 7162 §3.1.5, §3.1.6).
	usesModSeq bool
	maxModSeq  uint64
}

func (e *evaluator) init(s *session, k imapwire.SearchKey) {
	e.s, e.key = s, k
	e.walk(k)
}

func (e *evaluator) walk(k imapwire.SearchKey) {
	switch k.Op {
	case "FROM", "TO", "CC", "BCC", "SUBJECT", "SENTBEFORE", "SENTON", "SENTSINCE":
		e.parsed, e.meta = true, true
	case "HEADER", "BODY", "TEXT":
		e.parsed, e.blob, e.meta = true, true, true
	case "BEFORE", "ON", "SINCE", "LARGER", "SMALLER":
		e.meta = true
	case "MODSEQ":
		e.meta, e.usesModSeq = true, true
	}
	for _, c := range k.Children {
		e.walk(c)
	}
}

// run evaluates the program for the given view indexes.
func (e *evaluator) run(idx []int) ([]int, error) {
	v := e.s.sel
	var byUID map[uint32]*store.MessageMeta
	if e.meta {
		metas, err := e.s.srv.st.Fetch(e.s.ctx, v.mb.ID, v.uidSet(idx), store.FetchOptions{Parsed: e.parsed})
		if err != nil {
			return nil, fmt.Errorf("search fetch: %w", err)
		}
		byUID = make(map[uint32]*store.MessageMeta, len(metas))
		for i := range metas {
			byUID[metas[i].UID] = &metas[i]
		}
	}
	var out []int
	for _, i := range idx {
		uid := v.uids[i]
		if v.pending[uid] {
			continue
		}
		m := &candidate{ev: e, seq: uint32(i + 1), uid: uid, flags: v.flags[i], recent: v.recent[uid]}
		if e.meta {
			if m.meta = byUID[uid]; m.meta == nil {
				continue
			}
		}
		ok, err := m.match(e.key, 0)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, i)
			if m.meta != nil && m.meta.ModSeq > e.maxModSeq {
				e.maxModSeq = m.meta.ModSeq
			}
		}
	}
	return out, nil
}
