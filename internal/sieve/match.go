package sieve

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Comparators (RFC 4790, RFC 5228 §2.7.3) and match types (RFC 5228
// §2.7.1, RFC 5231).

type comparator uint8

const (
	cmpCasemap comparator = iota // i;ascii-casemap, the default
	cmpOctet                     // i;octet
	cmpNumeric                   // i;ascii-numeric (RFC 4790 §9.1)
)

var comparators = map[string]comparator{
	"i;ascii-casemap": cmpCasemap,
	"i;octet":         cmpOctet,
	"i;ascii-numeric": cmpNumeric,
}

type matchType uint8

const (
	matchIs matchType = iota
	matchContains
	matchMatches
	matchValue // relational :value (RFC 5231 §4.1)
	matchCount // relational :count (RFC 5231 §4.2)
)

// relational operators (RFC 5231 §5).
var relOps = map[string]bool{"gt": true, "ge": true, "lt": true, "le": true, "eq": true, "ne": true}

// matcher is the comparator, match type and keys of one test.
type matcher struct {
	cmp  comparator
	typ  matchType
	rel  string // for :value and :count
	keys strList
	// literal holds the keys when none has a variable, so that runs do
	// not expand them again.
	literal []string
}

// match reports whether any value matches any key (RFC 5228 §2.7.1). For
// :count the number of values is compared with each key. A successful
// :matches sets the match variables (RFC 5229 §3.2).
func (r *run) match(m *matcher, values []string) bool {
	keys := m.literal
	if keys == nil {
		keys = r.expandList(m.keys)
	}
	if m.typ == matchCount {
		n := strconv.Itoa(len(values))
		for _, k := range keys {
			if relational(m.rel, compareNumeric(n, k)) {
				return true
			}
		}
		return false
	}
	fold := m.cmp == cmpCasemap
	if fold && (m.typ == matchIs || m.typ == matchContains) {
		// Fold once per value and key rather than once per pair.
		folded := make([]string, len(keys))
		for i, k := range keys {
			folded[i] = lowerASCII(k)
		}
		for _, v := range values {
			v = lowerASCII(v)
			for _, k := range folded {
				if (m.typ == matchIs && v == k) || (m.typ == matchContains && strings.Contains(v, k)) {
					return true
				}
			}
		}
		return false
	}
	for _, v := range values {
		for _, k := range keys {
			if m.typ == matchMatches {
				if caps, ok := wildcard(v, k, m.cmp == cmpCasemap); ok {
					if r.s.exts["variables"] {
						r.matchVars = append([]string{v}, caps...)
					}
					return true
				}
				continue
			}
			if matchOne(m, v, k) {
				return true
			}
		}
	}
	return false
}

func matchOne(m *matcher, v, k string) bool {
	switch m.typ {
	case matchIs:
		return compare(m.cmp, v, k) == 0
	case matchContains:
		return contains(v, k, m.cmp == cmpCasemap)
	case matchValue:
		return relational(m.rel, compare(m.cmp, v, k))
	}
	return false
}

func relational(op string, c int) bool {
	switch op {
	case "gt":
		return c > 0
	case "ge":
		return c >= 0
	case "lt":
		return c < 0
	case "le":
		return c <= 0
	case "eq":
		return c == 0
	case "ne":
		return c != 0
	}
	return false
}

// compare orders a and b under the comparator.
func compare(c comparator, a, b string) int {
	switch c {
	case cmpNumeric:
		return compareNumeric(a, b)
	case cmpCasemap:
		a, b = lowerASCII(a), lowerASCII(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareNumeric is i;ascii-numeric (RFC 4790 §9.1): the value of a
// string is the number its leading digits spell; a string that does not
// start with a digit is positive infinity, equal to any other such string.
func compareNumeric(a, b string) int {
	na, inf1 := leadingNumber(a)
	nb, inf2 := leadingNumber(b)
	switch {
	case inf1 && inf2:
		return 0
	case inf1:
		return 1
	case inf2:
		return -1
	}
	// Compare digit strings without overflow: strip leading zeros,
	// then the longer is larger.
	switch {
	case len(na) != len(nb):
		if len(na) < len(nb) {
			return -1
		}
		return 1
	case na < nb:
		return -1
	case na > nb:
		return 1
	}
	return 0
}

func leadingNumber(s string) (digits string, infinite bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return "", true
	}
	d := s[:i]
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	return d, false
}

// contains is :contains, folding A-Z when fold is set.
func contains(v, k string, fold bool) bool {
	if k == "" {
		return true
	}
	if fold {
		v, k = lowerASCII(v), lowerASCII(k)
	}
	for i := 0; i+len(k) <= len(v); i++ {
		if v[i:i+len(k)] == k {
			return true
		}
	}
	return false
}

// wildcard is :matches (RFC 5228 §2.7.1): "*" matches any run of
// characters, "?" exactly one character, and "\" makes the next character
// literal. It returns what each wildcard matched (RFC 5229 §3.2), with
// "*" taking as little as it can (the leftmost-shortest rule). The search
// backtracks only to the last "*", so its cost is bounded by
// len(value)×len(pattern).
func wildcard(v, pat string, fold bool) ([]string, bool) {
	type tok struct {
		star, any bool
		c         rune
	}
	var toks []tok
	for i := 0; i < len(pat); {
		c, n := utf8.DecodeRuneInString(pat[i:])
		i += n
		switch c {
		case '*':
			toks = append(toks, tok{star: true})
		case '?':
			toks = append(toks, tok{any: true})
		case '\\':
			if i < len(pat) {
				c, n = utf8.DecodeRuneInString(pat[i:])
				i += n
			}
			toks = append(toks, tok{c: c})
		default:
			toks = append(toks, tok{c: c})
		}
	}
	runes := []rune(v)
	eq := func(a, b rune) bool {
		if fold && a < utf8.RuneSelf && b < utf8.RuneSelf {
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
		}
		return a == b
	}
	// starts[j] is where token j's match starts (and token j-1's ends).
	starts := make([]int, len(toks)+1)
	ti, vi := 0, 0
	lastStar, lastStarV := -1, 0
	for {
		if ti == len(toks) && vi == len(runes) {
			break
		}
		if ti < len(toks) {
			t := toks[ti]
			switch {
			case t.star:
				starts[ti] = vi
				lastStar, lastStarV = ti, vi
				ti++
				continue
			case vi < len(runes) && (t.any || eq(t.c, runes[vi])):
				starts[ti] = vi
				ti++
				vi++
				continue
			}
		}
		if lastStar < 0 || lastStarV >= len(runes) {
			return nil, false
		}
		// Let the last star take one more character and retry after it.
		lastStarV++
		ti, vi = lastStar+1, lastStarV
	}
	starts[len(toks)] = vi
	var caps []string
	for j, t := range toks {
		if t.star || t.any {
			caps = append(caps, string(runes[starts[j]:starts[j+1]]))
		}
	}
	return caps, true
}
