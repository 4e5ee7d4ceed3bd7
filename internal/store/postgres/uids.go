package postgres

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"pimail/internal/store"
)

// maxUID is the highest UID (RFC 9051 §2.3.1.1: a 32-bit number).
const maxUID = 1<<32 - 1

// span is a closed range of UIDs.
type span struct{ lo, hi int64 }

// spans turns a UID set into sorted, disjoint closed ranges: reversed
// ranges ("5:3", which IMAP sequence sets allow) are turned round and
// Stop 0 ("*") is the highest UID. An empty set gives nil.
func spans(uids store.UIDSet) []span {
	if len(uids) == 0 {
		return nil
	}
	out := make([]span, 0, len(uids))
	for _, r := range uids {
		a, b := int64(r.Start), int64(r.Stop)
		if b == 0 {
			b = maxUID
		}
		if b < a {
			a, b = b, a
		}
		out = append(out, span{a, b})
	}
	slices.SortFunc(out, func(x, y span) int { return cmp.Compare(x.lo, y.lo) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && s.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// inSpans reports whether uid is in ss (nil: every UID).
func inSpans(ss []span, uid uint32) bool {
	if ss == nil {
		return true
	}
	i, found := slices.BinarySearchFunc(ss, int64(uid), func(s span, u int64) int { return cmp.Compare(s.lo, u) })
	if found {
		return true
	}
	return i > 0 && int64(uid) <= ss[i-1].hi
}

// maxInlineSpans is the most ranges written into a statement as BETWEEN
// terms; a set of more ranges is read as the range that covers it and
// the rows are filtered with inSpans.
const maxInlineSpans = 16

// params accumulates a statement's arguments ($1, $2, …).
type params []any

// add appends v and returns its placeholder.
func (p *params) add(v any) string {
	*p = append(*p, v)
	return fmt.Sprintf("$%d", len(*p))
}

// uidCond returns a condition on column col for ss (nil: every UID), and
// whether it is exact; when it is not, the caller keeps only the rows
// inSpans accepts.
func uidCond(col string, ss []span, p *params) (cond string, exact bool) {
	switch {
	case ss == nil:
		return "true", true
	case len(ss) > maxInlineSpans:
		return col + " BETWEEN " + p.add(ss[0].lo) + " AND " + p.add(ss[len(ss)-1].hi), false
	}
	var b strings.Builder
	b.WriteByte('(')
	for i, s := range ss {
		if i > 0 {
			b.WriteString(" OR ")
		}
		if s.lo == s.hi {
			b.WriteString(col + " = " + p.add(s.lo))
		} else {
			b.WriteString(col + " BETWEEN " + p.add(s.lo) + " AND " + p.add(s.hi))
		}
	}
	b.WriteByte(')')
	return b.String(), true
}
