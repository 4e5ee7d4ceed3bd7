package imapd

import (
	"slices"
	"sort"
)

// This file implements SEARCHRES (RFC 5182): SEARCH RETURN (SAVE) keeps
// the result in the selected mailbox's view, and "$" refers to it in later
// commands as a sequence set or a UID set. The result is kept as UIDs, so
// expunged messages drop out of it by themselves (RFC 5182 §2.1), and it
// ends with the view at SELECT, EXAMINE, CLOSE and UNSELECT.

// savedIndexes returns the ascending view indexes of the saved result's
// messages that are still in the view.
func (v *mailboxView) savedIndexes() []int {
	var out []int
	for _, uid := range v.saved {
		if i, ok := v.index(uid); ok {
			out = append(out, i)
		}
	}
	return out
}

// inSaved reports whether uid is in the saved result.
func (v *mailboxView) inSaved(uid uint32) bool {
	_, ok := slices.BinarySearch(v.saved, uid)
	return ok
}

// saveResult stores a search result (ascending view indexes) as "$". With
// only MIN and/or MAX among the other RETURN options, just those messages
// are saved (RFC 5182 §2.4).
func (v *mailboxView) saveResult(hits []int, ret []string) {
	minMaxOnly := false
	for _, r := range ret {
		switch r {
		case "MIN", "MAX":
			minMaxOnly = true
		case "ALL", "COUNT":
			minMaxOnly = false
			v.saved = v.uidsOf(hits)
			return
		}
	}
	if !minMaxOnly || len(hits) == 0 {
		v.saved = v.uidsOf(hits)
		return
	}
	var uids []uint32
	if slices.Contains(ret, "MIN") {
		uids = append(uids, v.uids[hits[0]])
	}
	if slices.Contains(ret, "MAX") && (len(uids) == 0 || v.uids[hits[len(hits)-1]] != uids[0]) {
		uids = append(uids, v.uids[hits[len(hits)-1]])
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	v.saved = uids
}
