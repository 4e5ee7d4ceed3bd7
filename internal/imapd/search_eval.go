package imapd

import (
	"slices"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// maxSearchKeyDepth bounds the nesting of a translated search program.
const maxSearchKeyDepth = 100

// searchInfo is what a search reports besides its matches.
type searchInfo struct {
	usesModSeq bool // the program has a MODSEQ key (searchResult)
}

// toStoreQuery translates a parsed search key (RFC 9051 §6.4.4) into the
// store's protocol-neutral query. What only this session knows is resolved
// here: message sequence numbers, "$" (RFC 5182) and \Recent become UID
// sets of the session's view.
func (s *session) toStoreQuery(k imapwire.SearchKey, info *searchInfo, depth int) (store.SearchQuery, error) {
	if depth > maxSearchKeyDepth {
		return store.SearchQuery{}, bad("search program too deep")
	}
	v := s.sel
	not := func(q store.SearchQuery) store.SearchQuery {
		return store.SearchQuery{Op: store.SearchNot, Children: []store.SearchQuery{q}}
	}
	flag := func(f store.Flags) store.SearchQuery { return store.SearchQuery{Op: store.SearchFlag, Flags: f} }
	recent := func() store.SearchQuery {
		// An empty UIDs matches nothing (store.SearchUIDs).
		return store.SearchQuery{Op: store.SearchUIDs, UIDs: slices.Clone(v.recent)}
	}
	text := func(op store.SearchOp) store.SearchQuery { return store.SearchQuery{Op: op, Text: k.Str} }
	switch k.Op {
	case "AND", "OR":
		op := store.SearchAnd
		if k.Op == "OR" {
			op = store.SearchOr
		}
		q := store.SearchQuery{Op: op}
		for _, c := range k.Children {
			cq, err := s.toStoreQuery(c, info, depth+1)
			if err != nil {
				return q, err
			}
			q.Children = append(q.Children, cq)
		}
		return q, nil
	case "NOT":
		if len(k.Children) != 1 {
			return store.SearchQuery{}, bad("NOT needs one search key")
		}
		c, err := s.toStoreQuery(k.Children[0], info, depth+1)
		return not(c), err
	case "ALL":
		return store.SearchQuery{Op: store.SearchAll}, nil
	case "SEQSET", "UID":
		return store.SearchQuery{Op: store.SearchUIDs, UIDs: v.searchSet(k.Set, k.Op == "UID")}, nil
	case "ANSWERED":
		return flag(store.FlagAnswered), nil
	case "UNANSWERED":
		return not(flag(store.FlagAnswered)), nil
	case "DELETED":
		return flag(store.FlagDeleted), nil
	case "UNDELETED":
		return not(flag(store.FlagDeleted)), nil
	case "DRAFT":
		return flag(store.FlagDraft), nil
	case "UNDRAFT":
		return not(flag(store.FlagDraft)), nil
	case "FLAGGED":
		return flag(store.FlagFlagged), nil
	case "UNFLAGGED":
		return not(flag(store.FlagFlagged)), nil
	case "SEEN":
		return flag(store.FlagSeen), nil
	case "UNSEEN":
		return not(flag(store.FlagSeen)), nil
	case "RECENT":
		return recent(), nil
	case "UNRECENT", "OLD":
		return not(recent()), nil
	case "NEW": // RFC 3501 §6.4.4: RECENT UNSEEN
		return store.SearchQuery{Op: store.SearchAnd, Children: []store.SearchQuery{recent(), not(flag(store.FlagSeen))}}, nil
	case "KEYWORD", "UNKEYWORD":
		q := store.SearchQuery{Op: store.SearchKeyword, Keyword: k.Str}
		for _, sf := range systemFlags {
			if strings.EqualFold(sf.name, k.Str) {
				q = flag(sf.bit)
			}
		}
		if k.Op == "UNKEYWORD" {
			q = not(q)
		}
		return q, nil
	case "MODSEQ":
		// RFC 7162 §3.1.5: per-flag entry names are answered with the
		// message's MODSEQ, which is never lower than any of its flags'.
		info.usesModSeq = true
		return store.SearchQuery{Op: store.SearchModSeq, Num: k.Num}, nil
	case "EMAILID": // RFC 8474 §6 (objectid.go)
		if id, ok := blobOfEmailID(k.Str); ok {
			return store.SearchQuery{Op: store.SearchBlobID, Num: id}, nil
		}
		return store.SearchQuery{Op: store.SearchOr}, nil // an OR of nothing matches nothing
	case "THREADID": // no message has a THREADID (objectid.go)
		return store.SearchQuery{Op: store.SearchOr}, nil
	case "LARGER":
		return store.SearchQuery{Op: store.SearchLarger, Num: k.Num}, nil
	case "SMALLER":
		return store.SearchQuery{Op: store.SearchSmaller, Num: k.Num}, nil
	case "BEFORE", "ON", "SINCE", "SENTBEFORE", "SENTON", "SENTSINCE":
		op := map[string]store.SearchOp{"BEFORE": store.SearchBefore, "ON": store.SearchOn, "SINCE": store.SearchSince,
			"SENTBEFORE": store.SearchSentBefore, "SENTON": store.SearchSentOn, "SENTSINCE": store.SearchSentSince}[k.Op]
		return store.SearchQuery{Op: op, Date: k.Date}, nil
	case "SUBJECT":
		return text(store.SearchSubject), nil
	case "FROM":
		return text(store.SearchFrom), nil
	case "TO":
		return text(store.SearchTo), nil
	case "CC":
		return text(store.SearchCc), nil
	case "BCC":
		return text(store.SearchBcc), nil
	case "HEADER":
		return store.SearchQuery{Op: store.SearchHeader, Field: k.Field, Text: k.Str}, nil
	case "BODY":
		return text(store.SearchBody), nil
	case "TEXT":
		return text(store.SearchText), nil
	}
	return store.SearchQuery{}, bad("unsupported search key %s", k.Op)
}

// searchSet turns a sequence set, a UID set or "$" into the UIDs of the
// view it names. "*" is the last message of the view (RFC 9051 §9).
func (v *mailboxView) searchSet(set imapwire.SeqSet, uid bool) store.UIDSet {
	if set.Saved {
		return uidRanges(v.saved) // RFC 5182 §2.1
	}
	n := len(v.uids)
	var out store.UIDSet
	for _, r := range set.Ranges {
		if n == 0 {
			break
		}
		if uid {
			lo, hi := r.Resolve(v.maxUID())
			if hi == 0 {
				continue
			}
			out = append(out, store.UIDRange{Start: max(lo, 1), Stop: hi})
			continue
		}
		lo, hi := r.Resolve(uint32(n))
		if lo < 1 || lo > uint32(n) {
			continue
		}
		hi = min(hi, uint32(n))
		out = append(out, store.UIDRange{Start: v.uids[lo-1], Stop: v.uids[hi-1]})
	}
	return out
}

// uidRanges compresses ascending UIDs into ranges.
func uidRanges(uids []uint32) store.UIDSet {
	var out store.UIDSet
	for i := 0; i < len(uids); {
		j := i
		for j+1 < len(uids) && uids[j+1] == uids[j]+1 {
			j++
		}
		out = append(out, store.UIDRange{Start: uids[i], Stop: uids[j]})
		i = j + 1
	}
	return out
}
