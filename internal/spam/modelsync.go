package spam

import (
	"bytes"
	"fmt"
	"math"

	"pimail/internal/store"
)

// Saving a model to the store. The store replaces a model by
// compare-and-swap (store.SpamModels): when another writer (`pimail spam
// train`, another node) saved the model since this one was loaded, the
// save fails, and this model must be rebuilt as the stored one plus what
// it learned itself. A tracked model therefore keeps that apart: per
// token, how much its counts moved since the last save.

// delta is what a model learned since its last save.
type delta struct {
	tokens      map[uint64]dcounts
	nspam, nham int64
	// lost: more tokens changed than the model holds, and they were not
	// kept apart (the memory would rival the model's); a save that finds
	// the model changed by another writer then fails.
	lost bool
}

type dcounts struct{ spam, ham int64 }

// track makes the model keep its changes apart from now on.
func (m *Model) track() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tracked = true
	m.delta = delta{tokens: map[uint64]dcounts{}}
}

func (m *Model) isDirty() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.dirty
}

// noteMessages records a change of the message counts. Called with mu
// held for writing.
func (m *Model) noteMessages(dspam, dham int64) {
	if m.tracked {
		m.delta.nspam += dspam
		m.delta.nham += dham
	}
}

// noteToken records a change of a token's counts. Called with mu held
// for writing.
func (m *Model) noteToken(h uint64, dspam, dham int64) {
	if !m.tracked || m.delta.lost {
		return
	}
	c := m.delta.tokens[h]
	c.spam += dspam
	c.ham += dham
	if c == (dcounts{}) {
		delete(m.delta.tokens, h)
		return
	}
	m.delta.tokens[h] = c
	if len(m.delta.tokens) > m.maxTokens {
		m.delta = delta{lost: true, nspam: m.delta.nspam, nham: m.delta.nham}
	}
}

// snapshot encodes the model for a save and takes its changes out: they
// are what this save stores. A failed save gives them back (unsave).
func (m *Model) snapshot() ([]byte, delta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var buf bytes.Buffer
	m.writeLocked(&buf) // writes to memory: cannot fail
	d := m.delta
	m.delta = delta{tokens: map[uint64]dcounts{}}
	m.dirty = false
	return buf.Bytes(), d
}

// unsave gives back the changes of a snapshot whose save failed, in
// front of those learned since.
func (m *Model) unsave(d delta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirty = true
	d.nspam += m.delta.nspam
	d.nham += m.delta.nham
	if d.lost || m.delta.lost {
		m.delta = delta{lost: true, nspam: d.nspam, nham: d.nham}
		return
	}
	for h, c := range m.delta.tokens {
		x := d.tokens[h]
		x.spam += c.spam
		x.ham += c.ham
		if x == (dcounts{}) {
			delete(d.tokens, h)
		} else {
			d.tokens[h] = x
		}
	}
	m.delta = d
	if len(d.tokens) > m.maxTokens {
		m.delta = delta{lost: true, nspam: d.nspam, nham: d.nham}
	}
}

// rebase makes the model base plus its own unsaved changes (base, the
// model another writer saved, is not used afterwards).
func (m *Model) rebase(base *Model) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.delta.lost {
		return fmt.Errorf("the model was saved by another writer meanwhile, and the changes since its load are too many to add to it: %w", store.ErrModified)
	}
	base.thaw()
	m.tokens, m.tab = base.tokens, nil
	m.nspam = addClamped(base.nspam, m.delta.nspam)
	m.nham = addClamped(base.nham, m.delta.nham)
	for h, d := range m.delta.tokens {
		c := m.tokens[h]
		c.spam = addClamped(c.spam, d.spam)
		c.ham = addClamped(c.ham, d.ham)
		m.put(h, c)
	}
	if len(m.tokens) > m.maxTokens {
		m.prune()
	}
	return nil
}

// addClamped is v+d within the range of a count.
func addClamped(v uint32, d int64) uint32 {
	return uint32(min(max(int64(v)+d, 0), math.MaxUint32))
}
