package spam

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Model file format, version 1 (all integers unsigned varints unless
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

// ErrBadModel means a model file is damaged or of an unknown version.
var ErrBadModel = errors.New("spam: bad model file")

// WriteTo writes the model in the binary format.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	m.mu.RLock()
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
	m.mu.RUnlock()
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

// readModel parses a model file's bytes.
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

// LoadModel reads a model file. A missing file is an empty model.
func LoadModel(path string, maxTokens int) (*Model, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return NewModel(maxTokens), nil
	}
	if err != nil {
		return nil, fmt.Errorf("load spam model: %w", err)
	}
	m, err := readModel(data, maxTokens)
	if err != nil {
		return nil, fmt.Errorf("load spam model %s: %w", path, err)
	}
	return m, nil
}

// SaveModel writes the model atomically: a temporary file in the same
// directory, fsync, rename over the old file, fsync of the directory. A
// crash leaves either the old or the new model, never a torn one.
func SaveModel(path string, m *Model) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save spam model: %w", err)
	}
	f, err := os.CreateTemp(dir, ".model-*.tmp")
	if err != nil {
		return fmt.Errorf("save spam model: %w", err)
	}
	tmp := f.Name()
	m.mu.Lock()
	m.dirty = false
	m.mu.Unlock()
	_, err = m.WriteTo(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		m.mu.Lock()
		m.dirty = true
		m.mu.Unlock()
		return fmt.Errorf("save spam model %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("save spam model: sync %s: %w", dir, err)
		}
	}
	return nil
}
