package spam

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"pimail/internal/message"
)

// A model read from a file is a sorted table; it must give the counts,
// and so the verdicts, of the map it was written from, bit for bit, and
// become a map again when trained.
func TestModelTableMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	m := NewModel(0)
	var seen []uint64
	for i := range 400 {
		hs := make([]uint64, 30)
		for j := range hs {
			if len(seen) > 0 && r.IntN(3) == 0 {
				hs[j] = seen[r.IntN(len(seen))]
			} else {
				hs[j] = r.Uint64()
				seen = append(seen, hs[j])
			}
		}
		m.learn(hs, i%3 == 0, 1)
	}
	seen = append(seen, 0, 1<<63, ^uint64(0)) // edges of the bucket index
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := readModel(buf.Bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.tab == nil || got.tokens != nil || got.Size() != m.Size() {
		t.Fatalf("loaded model: table %v, map %v, size %d want %d", got.tab != nil, got.tokens != nil, got.Size(), m.Size())
	}
	for _, h := range seen {
		for _, k := range []uint64{h, h + 1, h - 1} {
			if got.count(k) != m.tokens[k] {
				t.Fatalf("token %x: table %+v, map %+v", k, got.count(k), m.tokens[k])
			}
		}
	}
	for range 200 {
		msg := make([]uint64, 80)
		for j := range msg {
			msg[j] = seen[r.IntN(len(seen))]
			if j%4 == 0 {
				msg[j] = r.Uint64()
			}
		}
		p1, c1, ok1 := classify(msg, m)
		p2, c2, ok2 := classify(msg, got)
		if p1 != p2 || ok1 != ok2 || len(c1) != len(c2) {
			t.Fatalf("verdict differs: map %v %v %d clues, table %v %v %d clues", p1, ok1, len(c1), p2, ok2, len(c2))
		}
	}
	// Written again, the table gives the same file.
	var buf2 bytes.Buffer
	if _, err := got.WriteTo(&buf2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Fatal("table written differs from the map written")
	}
	// Training thaws it into a map with the same counts plus the change.
	h := seen[0]
	before := got.count(h)
	got.learn([]uint64{h}, true, 1)
	if got.tab != nil || got.tokens[h].spam != before.spam+1 || got.Size() != m.Size() {
		t.Fatalf("after training: table %v, %+v (was %+v), size %d", got.tab != nil, got.tokens[h], before, got.Size())
	}
}

func TestModelTableSmall(t *testing.T) {
	for _, n := range []int{0, 1, 2, 9, 17} {
		keys := make([]uint64, n)
		vals := make([]counts, n)
		for i := range keys {
			keys[i] = uint64(i+1) * (1 << 59)
			vals[i] = counts{spam: uint32(i + 1)}
		}
		tb := newTable(keys, vals)
		for i, k := range keys {
			if tb.get(k) != vals[i] || tb.get(k+1) != (counts{}) {
				t.Fatalf("n=%d key %d: %+v", n, i, tb.get(k))
			}
		}
		if tb.get(0) != (counts{}) {
			t.Fatalf("n=%d: absent 0 found", n)
		}
	}
}

// BenchmarkCheckSaved is BenchmarkCheck with the base model as the server
// has it: written by training and read back from the store.
func BenchmarkCheckSaved(b *testing.B) {
	st, _ := testStore(b, 0)
	trained := benchFilter(b)
	m, err := trained.Model(BaseAccount)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	if _, err := st.SaveSpamModel(context.Background(), BaseAccount, buf.Bytes(), 0, nil); err != nil {
		b.Fatal(err)
	}
	f, err := New(Config{Store: st, Logger: quiet(), ReloadInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range benchCases(b) {
		parsed := make([]*message.Parsed, len(c.msgs))
		for i, raw := range c.msgs {
			parsed[i] = message.Parse(raw)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := i % len(c.msgs)
				if _, err := f.Check(ctx, Input{Raw: c.msgs[k], Parsed: parsed[k], Accounts: []int64{1}}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
