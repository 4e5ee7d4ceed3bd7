package spam

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// Model format, version 1, as the store keeps it (store.SpamModels) and
// older versions kept it in files (all integers unsigned varints unless
// said otherwise):
//
//	magic    8 bytes "PIMSPAM\x00"
//	version  1 byte  (1)
//	nspam, nham, ntokens
//	ntokens × { hash 8 bytes big-endian, spam count, ham count }, hashes ascending
//	crc32    4 bytes big-endian (IEEE) of everything before it
//
// A typical token takes 10 bytes.
const (
	modelMagic   = "PIMSPAM\x00"
	modelVersion = 1
)

// ErrBadModel means a stored model is damaged or of an unknown version.
var ErrBadModel = errors.New("spam: bad model")

// WriteTo writes the model in the binary format.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.writeLocked(w)
}

// writeLocked is WriteTo, called with mu held.
func (m *Model) writeLocked(w io.Writer) (int64, error) {
	keys, vals := m.sorted()
	crc := crc32.NewIEEE()
	cw := &countWriter{w: io.MultiWriter(w, crc)}
	bw := bufio.NewWriterSize(cw, 64<<10)
	var buf [binary.MaxVarintLen64 + 8]byte
	bw.WriteString(modelMagic)
	bw.WriteByte(modelVersion)
	for _, v := range []uint64{uint64(m.nspam), uint64(m.nham), uint64(len(keys))} {
		bw.Write(binary.AppendUvarint(buf[:0], v))
	}
	for i, h := range keys {
		c := vals[i]
		b := binary.BigEndian.AppendUint64(buf[:0], h)
		bw.Write(b)
		bw.Write(binary.AppendUvarint(buf[:0], uint64(c.spam)))
		bw.Write(binary.AppendUvarint(buf[:0], uint64(c.ham)))
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("write model: %w", err)
	}
	n, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return cw.n + int64(n), err
}

// sorted returns the tokens, hashes ascending, with their counts. Called
// with mu held.
func (m *Model) sorted() ([]uint64, []counts) {
	if m.tab != nil {
		return m.tab.keys, m.tab.vals
	}
	keys := make([]uint64, 0, len(m.tokens))
	for h := range m.tokens {
		keys = append(keys, h)
	}
	slices.Sort(keys)
	vals := make([]counts, len(keys))
	for i, h := range keys {
		vals[i] = m.tokens[h]
	}
	return keys, vals
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// CheckModel reports why data is not a model in this format (wrapping
// ErrBadModel); nil when it is one.
func CheckModel(data []byte) error {
	_, err := readModel(data, DefaultMaxTokens)
	return err
}

// readModel parses a model's bytes.
func readModel(data []byte, maxTokens int) (*Model, error) {
	if len(data) < len(modelMagic)+1+4 || string(data[:len(modelMagic)]) != modelMagic {
		return nil, fmt.Errorf("%w: no model header", ErrBadModel)
	}
	if v := data[len(modelMagic)]; v != modelVersion {
		return nil, fmt.Errorf("%w: version %d, this pimail reads %d", ErrBadModel, v, modelVersion)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrBadModel)
	}
	r := bytes.NewReader(body[len(modelMagic)+1:])
	var hdr [3]uint64
	for i := range hdr {
		v, err := binary.ReadUvarint(r)
		if err != nil || v > 1<<32-1 {
			return nil, fmt.Errorf("%w: header", ErrBadModel)
		}
		hdr[i] = v
	}
	if hdr[2] > uint64(r.Len())/10+1 {
		return nil, fmt.Errorf("%w: %d tokens cannot fit in %d bytes", ErrBadModel, hdr[2], r.Len())
	}
	m := NewModel(maxTokens)
	m.nspam, m.nham = uint32(hdr[0]), uint32(hdr[1])
	keys := make([]uint64, 0, hdr[2])
	vals := make([]counts, 0, hdr[2])
	ascending := true
	var hb [8]byte
	for i := uint64(0); i < hdr[2]; i++ {
		if _, err := io.ReadFull(r, hb[:]); err != nil {
			return nil, fmt.Errorf("%w: token %d: %v", ErrBadModel, i, err)
		}
		s, err1 := binary.ReadUvarint(r)
		h, err2 := binary.ReadUvarint(r)
		if err1 != nil || err2 != nil || s > 1<<32-1 || h > 1<<32-1 {
			return nil, fmt.Errorf("%w: token %d counts", ErrBadModel, i)
		}
		k := binary.BigEndian.Uint64(hb[:])
		if len(keys) > 0 && k <= keys[len(keys)-1] {
			ascending = false
		}
		keys = append(keys, k)
		vals = append(vals, counts{spam: uint32(s), ham: uint32(h)})
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadModel, r.Len())
	}
	if ascending {
		m.tokens, m.tab = nil, newTable(keys, vals)
	} else {
		// Not as this pimail writes them: a later entry of a hash wins.
		for i, k := range keys {
			m.tokens[k] = vals[i]
		}
	}
	if m.size() > m.maxTokens {
		m.prune()
	}
	return m, nil
}
