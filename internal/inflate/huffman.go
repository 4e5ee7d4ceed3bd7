package inflate

import (
	"errors"
	"sync"
)

const (
	maxCodeLen = 15 // longest Huffman code, RFC 1951 §3.2.7
	fastBits   = 9  // bits resolved by one table lookup
	fastMask   = 1<<fastBits - 1
	maxLitSyms = 288 // literal/length alphabet incl. the two unused codes (§3.2.6)
	maxNumLit  = 286 // HLIT may announce at most 286 codes (§3.2.7)
	maxNumDist = 30  // HDIST may announce at most 30 codes (§3.2.7)
)

var errOversubscribed = errors.New("over-subscribed Huffman code lengths")

// huffman is a canonical Huffman code (RFC 1951 §3.2.2) prepared for
// decoding. Codes of up to fastBits bits are resolved by a table indexed by
// the next fastBits input bits (which arrive least significant bit first,
// while Huffman codes are packed most significant bit first, §3.1.1, so the
// index is the bit-reversed code). Longer codes go through a canonical
// decode over count/symbol, one bit at a time.
type huffman struct {
	// fast[i] is sym<<4 | length for the code that is a prefix of the bit
	// string i (read LSB first), or 0 when no code of ≤ fastBits bits is.
	fast   [1 << fastBits]uint16
	count  [maxCodeLen + 1]uint16 // number of codes of each length
	symbol [maxLitSyms]uint16     // symbols ordered by code (length, then value)
}

// init builds the code from the code length of each symbol (0 = unused).
// Over-subscribed sets are rejected. Incomplete sets are accepted, as
// RFC 1951 does not forbid them (a single distance code of one bit is the
// usual case); decoding an unassigned code is then an error.
func (h *huffman) init(lengths []uint8) error {
	h.count = [maxCodeLen + 1]uint16{}
	for _, l := range lengths {
		h.count[l]++
	}
	h.count[0] = 0
	left := 1
	for l := 1; l <= maxCodeLen; l++ {
		left <<= 1
		left -= int(h.count[l])
		if left < 0 {
			return errOversubscribed
		}
	}
	// Step 2 of §3.2.2: the first code of each length; and the offset of
	// each length's symbols in h.symbol.
	var next [maxCodeLen + 2]uint16
	var offs [maxCodeLen + 2]uint16
	code := uint16(0)
	for l := 1; l <= maxCodeLen; l++ {
		code = (code + h.count[l-1]) << 1
		next[l] = code
		offs[l+1] = offs[l] + h.count[l]
	}
	h.fast = [1 << fastBits]uint16{}
	for sym, l := range lengths {
		if l == 0 {
			continue
		}
		h.symbol[offs[l]] = uint16(sym)
		offs[l]++
		c := next[l]
		next[l]++
		if l > fastBits {
			continue
		}
		r := reverse(c, uint(l))
		for i := r; i < 1<<fastBits; i += 1 << l {
			h.fast[i] = uint16(sym)<<4 | uint16(l)
		}
	}
	return nil
}

// reverse returns the low n bits of c in reverse order.
func reverse(c uint16, n uint) uint16 {
	var r uint16
	for i := uint(0); i < n; i++ {
		r = r<<1 | c&1
		c >>= 1
	}
	return r
}

var (
	fixedOnce sync.Once
	fixedLit  huffman
	fixedDist huffman
)

// fixedTables returns the fixed codes of RFC 1951 §3.2.6.
func fixedTables() (*huffman, *huffman) {
	fixedOnce.Do(func() {
		var l [maxLitSyms]uint8
		for i := range l {
			switch {
			case i < 144:
				l[i] = 8
			case i < 256:
				l[i] = 9
			case i < 280:
				l[i] = 7
			default:
				l[i] = 8
			}
		}
		if err := fixedLit.init(l[:]); err != nil {
			panic("inflate: fixed literal code: " + err.Error())
		}
		var d [32]uint8
		for i := range d {
			d[i] = 5
		}
		if err := fixedDist.init(d[:]); err != nil {
			panic("inflate: fixed distance code: " + err.Error())
		}
	})
	return &fixedLit, &fixedDist
}
