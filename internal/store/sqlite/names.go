package sqlite

import (
	"strings"

	"pimail/internal/store"
)

// uidSetSQL returns an SQL condition on column col for a UID set and its
// arguments. An empty set matches everything. Large sets fall back to a range
// covering them; callers filter the rows with UIDSet.Contains as well.
func uidSetSQL(col string, uids store.UIDSet) (string, []any) {
	if len(uids) == 0 {
		return "1", nil
	}
	if len(uids) > 32 {
		lo, hi := uint32(0xffffffff), uint32(0)
		for _, r := range uids {
			a, b := r.Start, r.Stop
			if b != 0 && b < a {
				a, b = b, a
			}
			lo = min(lo, a)
			if b == 0 {
				return col + " >= ?", []any{lo}
			}
			hi = max(hi, b)
		}
		return col + " BETWEEN ? AND ?", []any{lo, hi}
	}
	var sb strings.Builder
	var args []any
	sb.WriteString("(")
	for i, r := range uids {
		if i > 0 {
			sb.WriteString(" OR ")
		}
		a, b := r.Start, r.Stop
		if b != 0 && b < a {
			a, b = b, a
		}
		if b == 0 {
			sb.WriteString(col + " >= ?")
			args = append(args, a)
		} else {
			sb.WriteString(col + " BETWEEN ? AND ?")
			args = append(args, a, b)
		}
	}
	sb.WriteString(")")
	return sb.String(), args
}

// inSet is UIDSet.Contains that also accepts reversed ranges (Start > Stop),
// as IMAP sequence sets allow ("5:2").
func inSet(uids store.UIDSet, uid uint32) bool {
	if len(uids) == 0 {
		return true
	}
	for _, r := range uids {
		a, b := r.Start, r.Stop
		if b != 0 && b < a {
			a, b = b, a
		}
		if uid >= a && (b == 0 || uid <= b) {
			return true
		}
	}
	return false
}
