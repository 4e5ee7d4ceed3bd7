package imapd

import (
	"fmt"
	"slices"
	"strings"

	"pimail/internal/imapwire"
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

// search runs a search program over the whole view in the store
// (store.Searcher: index columns and the full-text index) and returns the
// ascending view indexes of the matches. Messages the session has not
// been told about yet, or whose expunge it has not reported, are left out.
func (s *session) search(key imapwire.SearchKey) ([]int, *searchInfo, error) {
	v := s.sel
	info := &searchInfo{}
	q, err := s.toStoreQuery(key, info, 0)
	if err != nil {
		return nil, nil, err
	}
	if info.usesModSeq {
		s.enableCondStore() // RFC 7162 §3.1: a CONDSTORE enabling command
	}
	res, err := s.srv.st.Search(s.ctx, v.mb.ID, q)
	if err != nil {
		return nil, nil, fmt.Errorf("search: %w", err)
	}
	hits := make([]int, 0, len(res.UIDs))
	for j, uid := range res.UIDs {
		i, ok := v.index(uid)
		if !ok || v.pending[uid] {
			continue
		}
		hits = append(hits, i)
		if j < len(res.ModSeqs) && res.ModSeqs[j] > info.maxModSeq {
			info.maxModSeq = res.ModSeqs[j]
		}
	}
	return hits, info, nil
}

// checkCharset accepts the charsets search strings may come in.
func checkCharset(cs string) error {
	if cs != "" && !strings.EqualFold(cs, "UTF-8") && !strings.EqualFold(cs, "US-ASCII") {
		return no("BADCHARSET (UTF-8 US-ASCII)", "unsupported charset")
	}
	return nil
}
