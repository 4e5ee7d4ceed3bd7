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
// IMAP4rev2 sessions and whenever RETURN is given, with PARTIAL and UPDATE
// (RFC 5267 §4).
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
	res, err := s.search(sc.Key)
	if err != nil {
		return "", "", err
	}
	ret := sc.Return
	if save {
		v.saveResult(res.idx, ret)
		ret = slices.DeleteFunc(slices.Clone(ret), func(r string) bool { return r == "SAVE" })
		if len(ret) == 0 {
			// RFC 5182 §2.4: SAVE alone produces no ESEARCH response.
			return "", "", nil
		}
	}
	if s.rev2 || sc.HasReturn {
		s.writeESearch(cmd, ret, sc.Partial, res)
	} else {
		s.w.Raw("* SEARCH")
		for _, i := range res.idx {
			s.w.SP().Number(uint64(s.msgNumber(i, cmd.uid)))
		}
		if res.usesModSeq && len(res.idx) > 0 {
			// RFC 7162 §3.1.6: "* SEARCH 2 5 (MODSEQ 917162500)".
			s.w.Raw(" (MODSEQ ").Number(slices.Max(res.modseqs)).Byte(')')
		}
		s.w.CRLF()
	}
	if slices.Contains(ret, "UPDATE") {
		return s.addContext(cmd, sc.Key, nil, res), "", nil // context.go
	}
	return "", "", nil
}

// writeESearch writes "* ESEARCH (TAG "t") [UID] MIN.. MAX.. COUNT..
// ALL.. PARTIAL.." (RFC 4731 §3.1, RFC 5267 §4.4) for a result in its
// order (ascending for SEARCH, sorted for SORT: RFC 5267 §3.1 makes MIN
// and MAX the first and last of it). Without MIN, MAX, COUNT, ALL or
// PARTIAL, ALL is meant. A MODSEQ search adds "MODSEQ n": the highest
// MODSEQ of the messages returned, which for MIN and MAX alone are just
// those one or two (RFC 4731 §3.2, RFC 7162 §3.1.5).
func (s *session) writeESearch(cmd *command, ret []string, partial imapwire.PartialRange, res searchResult) {
	if !slices.ContainsFunc(ret, func(r string) bool {
		return r == "MIN" || r == "MAX" || r == "COUNT" || r == "ALL" || r == "PARTIAL"
	}) {
		ret = append(slices.Clone(ret), "ALL")
	}
	nums := make([]uint32, len(res.idx))
	for n, i := range res.idx {
		nums[n] = s.msgNumber(i, cmd.uid)
	}
	w := s.w
	w.Raw("* ESEARCH (TAG ").String(cmd.tag).Byte(')')
	if cmd.uid {
		w.Raw(" UID")
	}
	var modseq uint64
	seen := func(k int) { modseq = max(modseq, res.modseqs[k]) }
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
				seen(0)
			}
		case "MAX":
			if len(nums) > 0 {
				w.Raw(" MAX ").Number(uint64(nums[len(nums)-1]))
				seen(len(nums) - 1)
			}
		case "COUNT":
			w.Raw(" COUNT ").Int(int64(len(nums)))
			for k := range nums {
				seen(k)
			}
		case "ALL":
			if len(nums) > 0 {
				w.Raw(" ALL ").Raw(imapwire.FormatUIDs(nums))
				for k := range nums {
					seen(k)
				}
			}
		case "PARTIAL":
			// RFC 5267 §4.4: the requested range and the messages at
			// those positions of the result, or NIL.
			w.Raw(" PARTIAL (").Number(uint64(partial.First)).Byte(':').Number(uint64(partial.Last)).SP()
			lo, hi := int(partial.First)-1, min(int(partial.Last), len(nums))
			if lo >= hi {
				w.NIL()
			} else {
				w.Raw(imapwire.FormatUIDs(nums[lo:hi]))
				for k := lo; k < hi; k++ {
					seen(k)
				}
			}
			w.Byte(')')
		}
	}
	if res.usesModSeq && modseq > 0 {
		w.Raw(" MODSEQ ").Number(modseq)
	}
	w.CRLF()
}

// searchResult is what a search found: view indexes, ascending (or in
// sort order once sorted), with each message's MODSEQ.
type searchResult struct {
	idx     []int
	modseqs []uint64
	// usesModSeq: the program has a MODSEQ key, so the answer carries the
	// highest MODSEQ of the matches (RFC 7162 §3.1.5, §3.1.6).
	usesModSeq bool
}

// search runs a search program over the whole view in the store
// (store.Searcher: index columns and the full-text index) and returns the
// ascending view indexes of the matches. Messages the session has not
// been told about yet, or whose expunge it has not reported, are left out.
func (s *session) search(key imapwire.SearchKey) (searchResult, error) {
	v := s.sel
	info := &searchInfo{}
	q, err := s.toStoreQuery(key, info, 0)
	if err != nil {
		return searchResult{}, err
	}
	if info.usesModSeq {
		s.enableCondStore() // RFC 7162 §3.1: a CONDSTORE enabling command
	}
	res, err := s.srv.st.Search(s.ctx, v.mb.ID, q)
	if err != nil {
		return searchResult{}, fmt.Errorf("search: %w", err)
	}
	out := searchResult{idx: make([]int, 0, len(res.UIDs)), modseqs: make([]uint64, 0, len(res.UIDs)),
		usesModSeq: info.usesModSeq}
	for j, uid := range res.UIDs {
		i, ok := v.index(uid)
		if !ok || v.pending[uid] {
			continue
		}
		var ms uint64
		if j < len(res.ModSeqs) {
			ms = res.ModSeqs[j]
		}
		out.idx = append(out.idx, i)
		out.modseqs = append(out.modseqs, ms)
	}
	return out, nil
}

// checkCharset accepts the charsets search strings may come in.
func checkCharset(cs string) error {
	if cs != "" && !strings.EqualFold(cs, "UTF-8") && !strings.EqualFold(cs, "US-ASCII") {
		return no("BADCHARSET (UTF-8 US-ASCII)", "unsupported charset")
	}
	return nil
}
