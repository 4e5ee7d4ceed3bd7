package imapd

import (
	"fmt"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

const searchChunk = 1000

// cmdSearch implements SEARCH and UID SEARCH (RFC 9051 §6.4.4): the SEARCH
// response for IMAP4rev1 sessions, ESEARCH (RFC 4731, RFC 9051 §7.3.4) for
// IMAP4rev2 sessions and whenever RETURN is given.
func cmdSearch(s *session, cmd *command) (string, string, error) {
	sc, err := imapwire.ParseSearch(cmd.args)
	if err != nil {
		return "", "", bad("%s", err.Error())
	}
	if sc.Charset != "" && !strings.EqualFold(sc.Charset, "UTF-8") && !strings.EqualFold(sc.Charset, "US-ASCII") {
		return "", "", no("BADCHARSET (UTF-8 US-ASCII)", "unsupported charset")
	}
	for _, r := range sc.Return {
		if r == "SAVE" {
			return "", "", bad("SEARCHRES is not supported")
		}
	}
	v := s.sel
	var ev evaluator
	ev.init(s, sc.Key)
	if err := ev.prepare(sc.Key, v); err != nil {
		return "", "", err
	}
	var hits []int
	for start := 0; start < len(v.uids); start += searchChunk {
		idx := make([]int, 0, searchChunk)
		for i := start; i < min(start+searchChunk, len(v.uids)); i++ {
			idx = append(idx, i)
		}
		found, err := ev.run(idx)
		if err != nil {
			return "", "", err
		}
		hits = append(hits, found...)
	}
	nums := make([]uint32, len(hits))
	for i, x := range hits {
		if cmd.uid {
			nums[i] = v.uids[x]
		} else {
			nums[i] = uint32(x + 1)
		}
	}
	if s.rev2 || sc.HasReturn {
		s.writeESearch(cmd, sc.Return, nums)
	} else {
		s.w.Raw("* SEARCH")
		for _, n := range nums {
			s.w.SP().Number(uint64(n))
		}
		s.w.CRLF()
	}
	return "", "", nil
}

// writeESearch writes "* ESEARCH (TAG "t") [UID] MIN.. MAX.. COUNT.. ALL.."
// (RFC 4731 §3.1); no RETURN options, or an empty list, mean ALL.
func (s *session) writeESearch(cmd *command, ret []string, nums []uint32) {
	if len(ret) == 0 {
		ret = []string{"ALL"}
	}
	w := s.w
	w.Raw("* ESEARCH (TAG ").String(cmd.tag).Byte(')')
	if cmd.uid {
		w.Raw(" UID")
	}
	for _, r := range ret {
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
	w.CRLF()
}

// evaluator runs a search program over view messages.
type evaluator struct {
	s      *session
	key    imapwire.SearchKey
	parsed bool // needs the envelope and MIME structure
	blob   bool // needs the message bytes (HEADER, BODY, TEXT)
	meta   bool // needs dates or sizes from the index
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
	}
	for _, c := range k.Children {
		e.walk(c)
	}
}

// prepare checks the sets in the program against the view.
func (e *evaluator) prepare(k imapwire.SearchKey, v *mailboxView) error {
	if (k.Op == "SEQSET" || k.Op == "UID") && k.Set.Saved {
		return bad("$ (SEARCHRES) is not supported")
	}
	for _, c := range k.Children {
		if err := e.prepare(c, v); err != nil {
			return err
		}
	}
	return nil
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
		}
	}
	return out, nil
}
