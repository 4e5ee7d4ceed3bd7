package imapwire

import (
	"errors"
	"fmt"
	"strconv"
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
	Return    []string // RETURN options (RFC 4731 / RFC 9051 §6.4.4), upper case; nil when absent
	HasReturn bool
	Charset   string
	Key       SearchKey
}

const maxSearchDepth = 50

// ParseSearch parses "[RETURN (...)] [CHARSET c] key..." (RFC 9051 §6.4.4).
func ParseSearch(args []Arg) (SearchCommand, error) {
	var sc SearchCommand
	i := 0
	if i < len(args) && args[i].Kind == KindAtom && upper(args[i].Str) == "RETURN" {
		if i+1 >= len(args) || args[i+1].Kind != KindList {
			return sc, errors.New("RETURN needs a list")
		}
		sc.HasReturn = true
		sc.Return = []string{}
		for _, o := range args[i+1].List {
			if o.Kind != KindAtom {
				return sc, errors.New("invalid RETURN option")
			}
			opt := upper(o.Str)
			switch opt {
			case "MIN", "MAX", "ALL", "COUNT", "SAVE":
			default:
				return sc, fmt.Errorf("unsupported RETURN option %q", o.Str)
			}
			sc.Return = append(sc.Return, opt)
		}
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
