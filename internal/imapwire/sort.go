package imapwire

import "errors"

// This file holds the grammar of SORT and THREAD (RFC 5256 §3, §5) and
// the DISPLAYFROM/DISPLAYTO sort keys (RFC 5957).

// SortKey is one sort criterion; Reverse applies to it alone.
type SortKey struct {
	Name    string // ARRIVAL, CC, DATE, FROM, SIZE, SUBJECT, TO, DISPLAYFROM, DISPLAYTO
	Reverse bool
}

var errSort = errors.New("invalid sort criteria")

// ParseSortCriteria parses "(REVERSE DATE SUBJECT ...)".
func ParseSortCriteria(a Arg) ([]SortKey, error) {
	if a.Kind != KindList || len(a.List) == 0 {
		return nil, errSort
	}
	var keys []SortKey
	rev := false
	for _, it := range a.List {
		if it.Kind != KindAtom {
			return nil, errSort
		}
		name := upper(it.Str)
		switch name {
		case "REVERSE":
			if rev {
				return nil, errSort
			}
			rev = true
			continue
		case "ARRIVAL", "CC", "DATE", "FROM", "SIZE", "SUBJECT", "TO", "DISPLAYFROM", "DISPLAYTO":
		default:
			return nil, errSort
		}
		keys = append(keys, SortKey{Name: name, Reverse: rev})
		rev = false
	}
	if rev {
		return nil, errSort // REVERSE must precede a key
	}
	return keys, nil
}

// ParseCharsetSearch parses "charset search-key..." as SORT and THREAD
// give them: the charset is mandatory and has no CHARSET keyword.
func ParseCharsetSearch(args []Arg) (SearchCommand, error) {
	if len(args) < 2 {
		return SearchCommand{}, errors.New("missing charset or search key")
	}
	if _, ok := args[0].AString(); !ok {
		return SearchCommand{}, errors.New("invalid charset")
	}
	full := make([]Arg, 0, len(args)+1)
	full = append(full, Arg{Kind: KindAtom, Str: "CHARSET"})
	full = append(full, args...)
	return ParseSearch(full)
}
