package imapwire

import (
	"errors"
	"strconv"
	"strings"
)

// SeqRange is a closed range of a sequence set; 0 stands for "*", the
// largest number in use (RFC 9051 §9 seq-number). Start may exceed Stop:
// "4:2" and "2:4" are the same range.
type SeqRange struct{ Start, Stop uint32 }

// SeqSet is a sequence set or a UID set, or "$" (the saved result, RFC 5182).
type SeqSet struct {
	Ranges []SeqRange
	Saved  bool // "$"
}

var errSeqSet = errors.New("invalid sequence set")

// ParseSeqSet parses a sequence-set (RFC 9051 §9).
func ParseSeqSet(s string) (SeqSet, error) {
	if s == "$" {
		return SeqSet{Saved: true}, nil
	}
	if s == "" || len(s) > 1<<20 {
		return SeqSet{}, errSeqSet
	}
	var set SeqSet
	for _, part := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(part, ":")
		x, err := parseSeqNumber(a)
		if err != nil {
			return SeqSet{}, err
		}
		y := x
		if isRange {
			if y, err = parseSeqNumber(b); err != nil {
				return SeqSet{}, err
			}
		}
		set.Ranges = append(set.Ranges, SeqRange{x, y})
	}
	return set, nil
}

func parseSeqNumber(s string) (uint32, error) {
	if s == "*" {
		return 0, nil
	}
	if s == "" || s[0] == '0' || len(s) > 10 {
		return 0, errSeqSet
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errSeqSet
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, errSeqSet
	}
	return uint32(n), nil
}

// Resolve returns the range with "*" replaced by max and Start <= Stop.
func (r SeqRange) Resolve(max uint32) (lo, hi uint32) {
	lo, hi = r.Start, r.Stop
	if lo == 0 {
		lo = max
	}
	if hi == 0 {
		hi = max
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	return lo, hi
}

// Contains reports whether n is in the set, "*" being max.
func (s SeqSet) Contains(n, max uint32) bool {
	for _, r := range s.Ranges {
		lo, hi := r.Resolve(max)
		if n >= lo && n <= hi {
			return true
		}
	}
	return false
}

// HasStar reports whether the set uses "*".
func (s SeqSet) HasStar() bool {
	for _, r := range s.Ranges {
		if r.Start == 0 || r.Stop == 0 {
			return true
		}
	}
	return false
}

// FormatUIDs writes ascending numbers as a compact sequence set ("1:3,7").
func FormatUIDs(nums []uint32) string {
	var b strings.Builder
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(nums[i]), 10))
		if j > i {
			b.WriteByte(':')
			b.WriteString(strconv.FormatUint(uint64(nums[j]), 10))
		}
		i = j + 1
	}
	return b.String()
}
