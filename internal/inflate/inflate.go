// Package inflate is a streaming decoder for raw DEFLATE (RFC 1951) that
// hands decoded bytes to the caller as soon as it has them.
//
// compress/flate only returns data at a stored block or when its window
// fills, so a peer that flushes with zlib's Z_PARTIAL_FLUSH (the data block
// followed by an empty fixed-Huffman block whose last bits may not have
// been sent yet, as mbsync does under IMAP COMPRESS, RFC 4978) is never
// answered: the decoder waits for bits the peer will only send with its
// next command. This decoder returns at the end of every block and whenever
// the caller's buffer is full, and it reads its input one byte at a time,
// never a byte before it is needed, so that waiting for input only happens
// after everything decodable so far has been returned.
package inflate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

const (
	winSize = 1 << 15 // the largest back-reference distance, RFC 1951 §2
	winMask = winSize - 1
)

// ErrCorrupt is wrapped by every error about malformed input.
var ErrCorrupt = errors.New("inflate: corrupt input")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Base values and extra bits of the length codes 257..285 and the distance
// codes 0..29, RFC 1951 §3.2.5.
var (
	lenBase = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
		35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lenExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
		3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase = [30]uint16{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
		257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6,
		7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
)

// codeLenOrder is the order of the code length code lengths, §3.2.7.
var codeLenOrder = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

type state uint8

const (
	stHeader state = iota // at a block header (or the end, after a final block)
	stStored              // inside a stored block, §3.2.4
	stHuff                // inside a compressed block, §3.2.5
	stDone                // the final block has ended
)

type decoder struct {
	br io.ByteReader
	bb *bufio.Reader // br when it is a *bufio.Reader: a direct call is cheaper
	r  io.Reader     // the same input, for the bulk data of stored blocks

	bits  uint64 // input bits not yet used, next bit lowest (§3.1.1)
	nbits uint

	state      state
	final      bool // the current block has BFINAL set
	storedLeft int  // bytes left in the current stored block
	copyLen    int  // bytes left of a back-reference cut short by the caller's buffer
	copyDist   int

	lit, dist        *huffman
	dynLit, dynDist  huffman
	codeLen          huffman
	lens             [maxNumLit + maxNumDist]uint8
	hist             [winSize]byte // the sliding window, a ring
	wpos             int           // where the next decoded byte goes in hist
	filled           int           // bytes of history, at most winSize
	rpos, pending    int           // decoded bytes not yet returned
	err              error         // sticky
	emptyStoredReads int
}

// NewReader returns a reader that decompresses the raw DEFLATE stream r.
// Read returns decoded bytes at the latest at the end of each block or when
// p is full, and reads from r only the bytes it needs to make progress, so
// after the final block r is positioned just past the stream. When r is
// not an io.ByteReader it is wrapped in a bufio.Reader (which may then read
// ahead of the stream's end).
func NewReader(r io.Reader) io.Reader {
	d := &decoder{}
	br, ok := r.(io.ByteReader)
	if !ok {
		b := bufio.NewReader(r)
		br, r = b, b
	}
	d.br, d.r = br, r
	d.bb, _ = br.(*bufio.Reader)
	return d
}

// Read implements io.Reader.
func (d *decoder) Read(p []byte) (int, error) {
	for {
		if d.pending > 0 {
			return d.drain(p), nil
		}
		if d.err != nil {
			return 0, d.err
		}
		if len(p) == 0 {
			return 0, nil
		}
		d.rpos = d.wpos
		n, err := d.decode(min(len(p), winSize))
		d.pending = n
		d.filled = min(d.filled+n, winSize)
		if err != nil {
			d.err = err
		}
	}
}

// drain copies pending decoded bytes from the window into p.
func (d *decoder) drain(p []byte) int {
	n := 0
	for n < len(p) && d.pending > 0 {
		k := copy(p[n:], d.hist[d.rpos:min(d.rpos+d.pending, winSize)])
		n += k
		d.pending -= k
		d.rpos = (d.rpos + k) & winMask
	}
	return n
}

// more reads one input byte into the bit buffer.
func (d *decoder) more() error {
	var b byte
	var err error
	if d.bb != nil {
		b, err = d.bb.ReadByte()
	} else {
		b, err = d.br.ReadByte()
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("inflate: reading input: %w", err)
	}
	d.bits |= uint64(b) << d.nbits
	d.nbits += 8
	return nil
}

// getBits returns the next n (≤ 16) bits as a number, first bit lowest
// (§3.1.1: data elements other than Huffman codes are packed LSB first).
func (d *decoder) getBits(n uint) (int, error) {
	for d.nbits < n {
		if err := d.more(); err != nil {
			return 0, err
		}
	}
	v := int(d.bits & (1<<n - 1))
	d.bits >>= n
	d.nbits -= n
	return v, nil
}

// sym decodes one symbol of h, reading only the input bytes the code
// needs: a table entry of length ≤ nbits is the code whatever the bits
// still to come, and an entry longer than nbits (or none, below fastBits)
// proves the code is longer than the bits at hand.
func (d *decoder) sym(h *huffman) (int, error) {
	for {
		e := h.fast[d.bits&fastMask]
		if n := uint(e & 15); n != 0 && n <= d.nbits {
			d.bits >>= n
			d.nbits -= n
			return int(e >> 4), nil
		}
		if d.nbits >= fastBits {
			break
		}
		if err := d.more(); err != nil {
			return 0, err
		}
	}
	// A code longer than fastBits: canonical decoding (§3.2.2), one bit at
	// a time. Codes of length l are consecutive integers starting at first.
	code, first, index := 0, 0, 0
	for l := uint(1); l <= maxCodeLen; l++ {
		for d.nbits < l {
			if err := d.more(); err != nil {
				return 0, err
			}
		}
		code |= int(d.bits>>(l-1)) & 1
		count := int(h.count[l])
		if code-count < first {
			d.bits >>= l
			d.nbits -= l
			return int(h.symbol[index+code-first]), nil
		}
		index += count
		first = (first + count) << 1
		code <<= 1
	}
	return 0, corrupt("invalid Huffman code")
}

// copyBack appends n bytes starting dist bytes back (§3.2.3: the copy may
// overlap the bytes it produces).
func (d *decoder) copyBack(n, dist int) {
	w := d.wpos
	for n > 0 {
		src := (w - dist) & winMask
		k := min(n, dist, winSize-src, winSize-w)
		copy(d.hist[w:w+k], d.hist[src:src+k])
		w = (w + k) & winMask
		n -= k
	}
	d.wpos = w
}

// endBlock moves past the end of the current block.
func (d *decoder) endBlock() {
	if d.final {
		d.state = stDone
	} else {
		d.state = stHeader
	}
}

// decode decodes up to limit (≤ winSize) bytes into the window. It returns
// early, with what it has, at the end of a block that produced output, and
// after a read of stored data.
func (d *decoder) decode(limit int) (int, error) {
	produced := 0
	for {
		switch d.state {
		case stDone:
			return produced, io.EOF

		case stHeader:
			// §3.2.3: BFINAL (1 bit), BTYPE (2 bits).
			v, err := d.getBits(3)
			if err != nil {
				return produced, err
			}
			d.final = v&1 == 1
			switch v >> 1 {
			case 0:
				// §3.2.4: skip to a byte boundary, then LEN and NLEN.
				d.bits >>= d.nbits & 7
				d.nbits -= d.nbits & 7
				n, err := d.getBits(16)
				if err != nil {
					return produced, err
				}
				nn, err := d.getBits(16)
				if err != nil {
					return produced, err
				}
				if n != ^nn&0xffff {
					return produced, corrupt("stored block length %#04x does not match its complement %#04x", n, nn)
				}
				d.storedLeft = n
				d.state = stStored
			case 1:
				d.lit, d.dist = fixedTables()
				d.state = stHuff
			case 2:
				if err := d.readDynamic(); err != nil {
					return produced, err
				}
				d.lit, d.dist = &d.dynLit, &d.dynDist
				d.state = stHuff
			default:
				return produced, corrupt("reserved block type 3")
			}

		case stStored:
			if d.storedLeft == 0 {
				d.endBlock()
				if produced > 0 {
					return produced, nil
				}
				continue
			}
			if produced == limit {
				return produced, nil
			}
			if d.nbits >= 8 { // whole bytes already in the bit buffer
				d.hist[d.wpos] = byte(d.bits)
				d.wpos = (d.wpos + 1) & winMask
				d.bits >>= 8
				d.nbits -= 8
				d.storedLeft--
				produced++
				continue
			}
			if produced > 0 {
				return produced, nil // do not wait for input with output in hand
			}
			k := min(d.storedLeft, limit, winSize-d.wpos)
			m, err := d.r.Read(d.hist[d.wpos : d.wpos+k])
			if m > 0 {
				d.emptyStoredReads = 0
				d.wpos = (d.wpos + m) & winMask
				d.storedLeft -= m
				produced += m
				if d.storedLeft == 0 {
					d.endBlock()
				}
				return produced, nil
			}
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return produced, fmt.Errorf("inflate: reading stored block: %w", err)
			}
			if d.emptyStoredReads++; d.emptyStoredReads > 100 {
				return produced, fmt.Errorf("inflate: reading stored block: %w", io.ErrNoProgress)
			}

		case stHuff:
			if n, err := d.huffBlock(limit, &produced); err != nil || n {
				return produced, err
			}
		}
	}
}

// huffBlock decodes a compressed block (§3.2.5) until its end or until
// produced reaches limit. It reports whether decode should return.
func (d *decoder) huffBlock(limit int, produced *int) (bool, error) {
	lit, dist := d.lit, d.dist
	out := *produced
	defer func() { *produced = out }()
	for out < limit {
		if d.copyLen > 0 {
			k := min(d.copyLen, limit-out)
			d.copyBack(k, d.copyDist)
			d.copyLen -= k
			out += k
			continue
		}
		var sym int
		e := lit.fast[d.bits&fastMask]
		if n := uint(e & 15); n != 0 && n <= d.nbits {
			d.bits >>= n
			d.nbits -= n
			sym = int(e >> 4)
		} else {
			var err error
			if sym, err = d.sym(lit); err != nil {
				return true, err
			}
		}
		if sym < 256 {
			d.hist[d.wpos&winMask] = byte(sym)
			d.wpos = (d.wpos + 1) & winMask
			out++
			continue
		}
		if sym == 256 {
			d.endBlock()
			return out > 0, nil
		}
		sym -= 257
		if sym >= len(lenBase) {
			return true, corrupt("invalid length code %d", sym+257)
		}
		length := int(lenBase[sym])
		if x := uint(lenExtra[sym]); x > 0 {
			v, err := d.getBits(x)
			if err != nil {
				return true, err
			}
			length += v
		}
		ds, err := d.sym(dist)
		if err != nil {
			return true, err
		}
		if ds >= len(distBase) {
			return true, corrupt("invalid distance code %d", ds)
		}
		distance := int(distBase[ds])
		if x := uint(distExtra[ds]); x > 0 {
			v, err := d.getBits(x)
			if err != nil {
				return true, err
			}
			distance += v
		}
		if distance > d.filled+out {
			return true, corrupt("distance %d too far back (%d bytes of history)", distance, min(d.filled+out, winSize))
		}
		d.copyLen, d.copyDist = length, distance
	}
	return true, nil
}

// readDynamic reads the code definitions of a dynamic block, §3.2.7.
func (d *decoder) readDynamic() error {
	hlit, err := d.getBits(5)
	if err != nil {
		return err
	}
	hdist, err := d.getBits(5)
	if err != nil {
		return err
	}
	hclen, err := d.getBits(4)
	if err != nil {
		return err
	}
	nlit, ndist, nclen := hlit+257, hdist+1, hclen+4
	if nlit > maxNumLit || ndist > maxNumDist {
		return corrupt("too many codes (HLIT %d, HDIST %d)", nlit, ndist)
	}
	var clens [19]uint8
	for i := 0; i < nclen; i++ {
		v, err := d.getBits(3)
		if err != nil {
			return err
		}
		clens[codeLenOrder[i]] = uint8(v)
	}
	if err := d.codeLen.init(clens[:]); err != nil {
		return corrupt("code length code: %v", err)
	}
	lens := d.lens[:nlit+ndist]
	for i := 0; i < len(lens); {
		sym, err := d.sym(&d.codeLen)
		if err != nil {
			return err
		}
		if sym < 16 {
			lens[i] = uint8(sym)
			i++
			continue
		}
		var rep int
		var val uint8
		switch sym {
		case 16: // copy the previous length 3-6 times
			if i == 0 {
				return corrupt("code length repeat with no previous length")
			}
			val = lens[i-1]
			rep, err = d.getBits(2)
			rep += 3
		case 17: // 3-10 zeros
			rep, err = d.getBits(3)
			rep += 3
		default: // 18: 11-138 zeros
			rep, err = d.getBits(7)
			rep += 11
		}
		if err != nil {
			return err
		}
		if i+rep > len(lens) {
			return corrupt("code length repeat past the end")
		}
		for ; rep > 0; rep-- {
			lens[i] = val
			i++
		}
	}
	if lens[256] == 0 {
		return corrupt("no end-of-block code")
	}
	if err := d.dynLit.init(lens[:nlit]); err != nil {
		return corrupt("literal/length code: %v", err)
	}
	if err := d.dynDist.init(lens[nlit:]); err != nil {
		return corrupt("distance code: %v", err)
	}
	return nil
}
