package imapwire

import (
	"errors"
	"strconv"
)

// This file holds the grammar of the CONDSTORE and QRESYNC extensions
// (RFC 7162 §7): the FETCH, STORE and SELECT/EXAMINE modifiers.

var errModifier = errors.New("invalid modifier")

// FetchModifiers are the fetch-modifiers of RFC 7162 §3.1.4 and §3.2.6.
type FetchModifiers struct {
	ChangedSince    uint64
	HasChangedSince bool
	Vanished        bool // only valid with CHANGEDSINCE in UID FETCH
}

// ParseFetchModifiers parses "(CHANGEDSINCE n [VANISHED])".
func ParseFetchModifiers(a Arg) (FetchModifiers, error) {
	var m FetchModifiers
	if a.Kind != KindList || len(a.List) == 0 {
		return m, errModifier
	}
	l := a.List
	for i := 0; i < len(l); i++ {
		if l[i].Kind != KindAtom {
			return m, errModifier
		}
		switch upper(l[i].Str) {
		case "CHANGEDSINCE":
			if m.HasChangedSince || i+1 >= len(l) || l[i+1].Kind != KindAtom {
				return m, errModifier
			}
			n, err := ParseModSeq(l[i+1].Str)
			if err != nil {
				return m, err
			}
			m.ChangedSince, m.HasChangedSince = n, true
			i++
		case "VANISHED":
			if m.Vanished {
				return m, errModifier
			}
			m.Vanished = true
		default:
			return m, errModifier
		}
	}
	return m, nil
}

// ParseStoreModifiers parses "(UNCHANGEDSINCE n)" (RFC 7162 §3.1.3) and
// returns n.
func ParseStoreModifiers(a Arg) (uint64, error) {
	if a.Kind != KindList || len(a.List) != 2 || a.List[0].Kind != KindAtom || a.List[1].Kind != KindAtom ||
		upper(a.List[0].Str) != "UNCHANGEDSINCE" {
		return 0, errModifier
	}
	// mod-sequence-valzer: 0 is allowed and makes every message fail.
	return parseModSeqValzer(a.List[1].Str)
}

// QResync is the QRESYNC select parameter (RFC 7162 §3.2.5).
type QResync struct {
	UIDValidity uint32
	ModSeq      uint64
	KnownUIDs   *SeqSet // nil when absent
	// SeqMatch is the optional (known-sequence-set known-uid-set); a
	// server with complete expunge history does not need it.
	SeqMatch [2]SeqSet
	HasMatch bool
}

// SelectParams are the SELECT/EXAMINE parameters (RFC 4466 §2.1).
type SelectParams struct {
	CondStore bool
	QResync   *QResync
}

// ParseSelectParams parses "(CONDSTORE)" or "(QRESYNC (uidvalidity
// modseq [known-uids [(seqs uids)]]))".
func ParseSelectParams(a Arg) (SelectParams, error) {
	var p SelectParams
	if a.Kind != KindList || len(a.List) == 0 {
		return p, errModifier
	}
	l := a.List
	for i := 0; i < len(l); i++ {
		if l[i].Kind != KindAtom {
			return p, errModifier
		}
		switch upper(l[i].Str) {
		case "CONDSTORE":
			p.CondStore = true
		case "QRESYNC":
			if p.QResync != nil || i+1 >= len(l) {
				return p, errModifier
			}
			q, err := parseQResync(l[i+1])
			if err != nil {
				return p, err
			}
			p.QResync = &q
			i++
		default:
			return p, errModifier
		}
	}
	return p, nil
}

func parseQResync(a Arg) (QResync, error) {
	var q QResync
	if a.Kind != KindList || len(a.List) < 2 || len(a.List) > 4 {
		return q, errModifier
	}
	l := a.List
	for _, x := range l[:2] {
		if x.Kind != KindAtom {
			return q, errModifier
		}
	}
	uv, err := ParseNumber(l[0].Str)
	if err != nil || uv == 0 {
		return q, errModifier
	}
	ms, err := ParseModSeq(l[1].Str)
	if err != nil {
		return q, err
	}
	q.UIDValidity, q.ModSeq = uv, ms
	rest := l[2:]
	if len(rest) > 0 && rest[0].Kind == KindAtom {
		set, err := ParseSeqSet(rest[0].Str)
		if err != nil || set.Saved {
			return q, errModifier
		}
		q.KnownUIDs = &set
		rest = rest[1:]
	}
	if len(rest) == 1 {
		m := rest[0]
		if m.Kind != KindList || len(m.List) != 2 || m.List[0].Kind != KindAtom || m.List[1].Kind != KindAtom {
			return q, errModifier
		}
		for j := 0; j < 2; j++ {
			set, err := ParseSeqSet(m.List[j].Str)
			if err != nil || set.Saved {
				return q, errModifier
			}
			q.SeqMatch[j] = set
		}
		q.HasMatch = true
	} else if len(rest) > 1 {
		return q, errModifier
	}
	return q, nil
}

// ParseModSeq parses a mod-sequence-value (RFC 7162 §7: 1*DIGIT, non-zero,
// at most 2^63-1).
func ParseModSeq(s string) (uint64, error) {
	n, err := parseModSeqValzer(s)
	if err != nil || n == 0 {
		return 0, errModifier
	}
	return n, nil
}

func parseModSeqValzer(s string) (uint64, error) {
	if s == "" || len(s) > 19 {
		return 0, errModifier
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errModifier
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errModifier
	}
	return uint64(n), nil
}
