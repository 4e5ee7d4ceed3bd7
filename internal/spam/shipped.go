package spam

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
)

// The base model pimail ships with, so that a new installation files
// spam from its first message instead of from the rules alone until the
// admin trains a base model of its own. It is the model format
// (modelcodec.go), gzip-compressed, trained by `go run ./bench/spamacc
// -write-shipped internal/spam/shipped/base.model.gz` on the
// SpamAssassin public corpus part of ../shared/corpus only: that part is
// public domain data (PDDL 1.0 / CC0, see docs/benchmarks.md for the
// reasoning and what leaving TREC 2007 out costs), whereas TREC 2007 is
// research data under its own agreement and is not redistributed, not
// even as hashed token counts. Tokens seen in fewer than
// ShippedMinCount messages are left out (they are most of a model and
// carry the least evidence).
//
//go:embed shipped/base.model.gz
var shippedGz []byte

// ShippedMinCount is the fewest messages a token must occur in to be
// kept in the shipped model.
const ShippedMinCount = 2

// shippedModel decodes the embedded model, bounded to maxTokens.
func shippedModel(maxTokens int) (*Model, error) {
	if len(shippedGz) == 0 {
		return NewModel(maxTokens), nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(shippedGz))
	if err != nil {
		return nil, fmt.Errorf("shipped spam model: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("shipped spam model: %w", err)
	}
	m, err := readModel(data, maxTokens)
	if err != nil {
		return nil, fmt.Errorf("shipped spam model: %w", err)
	}
	return m, nil
}

// WriteShipped writes m in the shipped model's form: tokens seen in
// fewer than minCount messages left out, the model file format, gzip.
func WriteShipped(w io.Writer, m *Model, minCount int) error {
	m.mu.RLock()
	keys, vals := m.sorted()
	kept := NewModel(len(keys) + 1)
	kept.nspam, kept.nham = m.nspam, m.nham
	var k []uint64
	var v []counts
	for i, h := range keys {
		if c := vals[i]; int(c.spam)+int(c.ham) >= minCount {
			k, v = append(k, h), append(v, c)
		}
	}
	m.mu.RUnlock()
	kept.tokens, kept.tab = nil, newTable(k, v)
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("write shipped model: %w", err)
	}
	if _, err := kept.WriteTo(zw); err != nil {
		return fmt.Errorf("write shipped model: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write shipped model: %w", err)
	}
	return nil
}
