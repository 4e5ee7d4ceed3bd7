package imapwire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SearchKey is one node of a search program (RFC 9051 §6.4.4). Op is the
// upper-case key name; "AND" holds Children (a parenthesised list or the
// implicit conjunction of the top level), "OR" two children, "NOT" one.
// "SEQSET" and "UID" use Set.
type SearchKey struct {
	Op       string
	Str      string // string argument (FROM, BODY, KEYWORD, HEADER value, ...)
	Field    string // HEADER field name
	Date     time.Time
	Num      int64 // LARGER, SMALLER, MODSEQ
	Set      SeqSet
	Children []SearchKey
}

// SearchCommand is the parsed argument list of SEARCH / UID SEARCH.
type SearchCommand struct {
	// Return holds the RETURN options (RFC 4731, RFC 5182, RFC 5267 §4),
	// upper case, PARTIAL's range apart in Partial; nil when absent.
	Return    []string
	HasReturn bool
	Partial   PartialRange // with "PARTIAL" in Return
	Charset   string
	Key       SearchKey
}

// PartialRange is the range of RETURN (PARTIAL first:last), RFC 5267
// §4.4: positions in the result, 1-based, First <= Last.
type PartialRange struct{ First, Last uint32 }

const maxSearchDepth = 50

// ParseReturnOptions parses the list after RETURN of SEARCH (RFC 4731
// §3.1, RFC 5182 SAVE) and of SORT (RFC 5267 §3): MIN, MAX, ALL, COUNT,
// SAVE, UPDATE, CONTEXT and PARTIAL first:last (§4.4, no "*").
func ParseReturnOptions(a Arg) (opts []string, partial PartialRange, err error) {
	if a.Kind != KindList {
		return nil, partial, errors.New("RETURN needs a list")
	}
	opts = []string{}
	l := a.List
	for i := 0; i < len(l); i++ {
		o := l[i]
		if o.Kind != KindAtom {
			return nil, partial, errors.New("invalid RETURN option")
		}
		opt := upper(o.Str)
		switch opt {
		case "MIN", "MAX", "ALL", "COUNT", "SAVE", "UPDATE", "CONTEXT":
		case "PARTIAL":
			if i+1 >= len(l) || l[i+1].Kind != KindAtom {
				return nil, partial, errors.New("PARTIAL needs a range")
			}
			a, b, ok := strings.Cut(l[i+1].Str, ":")
			x, err1 := parseSeqNumber(a)
			y, err2 := parseSeqNumber(b)
			if !ok || err1 != nil || err2 != nil || x == 0 || y == 0 {
				return nil, partial, errors.New("invalid PARTIAL range")
			}
			partial = PartialRange{min(x, y), max(x, y)}
			i++
		default:
			return nil, partial, fmt.Errorf("unsupported RETURN option %q", o.Str)
		}
		opts = append(opts, opt)
	}
	return opts, partial, nil
}

// ParseSearch parses "[RETURN (...)] [CHARSET c] key..." (RFC 9051 §6.4.4).
func ParseSearch(args []Arg) (SearchCommand, error) {
	var sc SearchCommand
	i := 0
	if i < len(args) && args[i].Kind == KindAtom && upper(args[i].Str) == "RETURN" {
		if i+1 >= len(args) {
			return sc, errors.New("RETURN needs a list")
		}
		var err error
		if sc.Return, sc.Partial, err = ParseReturnOptions(args[i+1]); err != nil {
			return sc, err
		}
		sc.HasReturn = true
		i += 2
	}
	if i < len(args) && args[i].Kind == KindAtom && upper(args[i].Str) == "CHARSET" {
		if i+1 >= len(args) {
			return sc, errors.New("CHARSET needs a value")
		}
		cs, ok := args[i+1].AString()
		if !ok {
			return sc, errors.New("invalid CHARSET")
		}
		sc.Charset = cs
		i += 2
	}
	if i >= len(args) {
		return sc, errors.New("missing search key")
	}
	p := &searchParser{args: args[i:]}
	var keys []SearchKey
	for p.pos < len(p.args) {
		k, err := p.key(0)
		if err != nil {
			return sc, err
		}
		keys = append(keys, k)
	}
	if len(keys) == 1 {
		sc.Key = keys[0]
	} else {
		sc.Key = SearchKey{Op: "AND", Children: keys}
	}
	return sc, nil
}

type searchParser struct {
	args []Arg
	pos  int
}

func (p *searchParser) next() (Arg, error) {
	if p.pos >= len(p.args) {
		return Arg{}, errors.New("missing search argument")
	}
	a := p.args[p.pos]
	p.pos++
	return a, nil
}

func (p *searchParser) str() (string, error) {
	a, err := p.next()
	if err != nil {
		return "", err
	}
	s, ok := a.AString()
	if !ok {
		return "", errors.New("expected a string")
	}
	return s, nil
}

func (p *searchParser) key(depth int) (SearchKey, error) {
	if depth > maxSearchDepth {
		return SearchKey{}, errors.New("search program nested too deep")
	}
	a, err := p.next()
	if err != nil {
		return SearchKey{}, err
	}
	if a.Kind == KindList {
		if len(a.List) == 0 {
			return SearchKey{}, errors.New("empty search list")
		}
		sub := &searchParser{args: a.List}
		k := SearchKey{Op: "AND"}
		for sub.pos < len(sub.args) {
			c, err := sub.key(depth + 1)
			if err != nil {
				return SearchKey{}, err
			}
			k.Children = append(k.Children, c)
		}
		return k, nil
	}
	if a.Kind != KindAtom {
		return SearchKey{}, errors.New("invalid search key")
	}
	op := upper(a.Str)
	k := SearchKey{Op: op}
	switch op {
	case "ALL", "ANSWERED", "DELETED", "DRAFT", "FLAGGED", "SEEN", "UNANSWERED", "UNDELETED",
		"UNDRAFT", "UNFLAGGED", "UNSEEN", "NEW", "OLD", "RECENT", "UNRECENT":
		return k, nil
	case "BCC", "BODY", "CC", "FROM", "SUBJECT", "TEXT", "TO", "KEYWORD", "UNKEYWORD":
		k.Str, err = p.str()
		return k, err
	case "HEADER":
		if k.Field, err = p.str(); err != nil {
			return k, err
		}
		k.Str, err = p.str()
		return k, err
	case "BEFORE", "ON", "SINCE", "SENTBEFORE", "SENTON", "SENTSINCE":
		s, err := p.str()
		if err != nil {
			return k, err
		}
		k.Date, err = ParseDate(s)
		return k, err
	case "LARGER", "SMALLER":
		s, err := p.str()
		if err != nil {
			return k, err
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return k, errors.New("invalid number")
		}
		k.Num = n
		return k, nil
	case "MODSEQ":
		// RFC 7162 §3.1.5: MODSEQ [entry-name entry-type-req] mod-sequence-valzer.
		a, err := p.next()
		if err != nil {
			return k, err
		}
		if a.Kind == KindQuoted || a.Kind == KindLiteral {
			name, _ := a.AString()
			typ, err := p.next()
			if err != nil {
				return k, err
			}
			t := upper(typ.Str)
			if typ.Kind != KindAtom || t != "PRIV" && t != "SHARED" && t != "ALL" {
				return k, errors.New("invalid MODSEQ entry type")
			}
			k.Field, k.Str = name, t
			if a, err = p.next(); err != nil {
				return k, err
			}
		}
		if a.Kind != KindAtom {
			return k, errors.New("invalid MODSEQ value")
		}
		n, err := parseModSeqValzer(a.Str)
		if err != nil {
			return k, errors.New("invalid MODSEQ value")
		}
		k.Num = int64(n)
		return k, nil
	case "UID":
		s, err := p.str()
		if err != nil {
			return k, err
		}
		k.Set, err = ParseSeqSet(s)
		return k, err
	case "EMAILID", "THREADID":
		// RFC 8474 §6, §7: objectid = 1*255(ALPHA / DIGIT / "_" / "-").
		a, err := p.next()
		if err != nil {
			return k, err
		}
		if a.Kind != KindAtom || !validObjectID(a.Str) {
			return k, errors.New("invalid object id")
		}
		k.Str = a.Str
		return k, nil
	case "NOT":
		c, err := p.key(depth + 1)
		if err != nil {
			return k, err
		}
		k.Children = []SearchKey{c}
		return k, nil
	case "OR":
		c1, err := p.key(depth + 1)
		if err != nil {
			return k, err
		}
		c2, err := p.key(depth + 1)
		if err != nil {
			return k, err
		}
		k.Children = []SearchKey{c1, c2}
		return k, nil
	}
	set, err := ParseSeqSet(a.Str)
	if err != nil {
		return k, fmt.Errorf("unknown search key %q", a.Str)
	}
	return SearchKey{Op: "SEQSET", Set: set}, nil
}

// validObjectID reports whether s is an objectid (RFC 8474 §7).
func validObjectID(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
