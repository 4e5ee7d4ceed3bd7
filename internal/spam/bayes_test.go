package spam

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestChi2Q(t *testing.T) {
	// Q(x; 2) = exp(-x/2); Q(10; 10) from tables: 0.44049.
	for _, tc := range []struct {
		x    float64
		v    int
		want float64
	}{{2, 2, math.Exp(-1)}, {10, 10, 0.44049}, {0, 4, 1}, {3000, 300, 0}} {
		if got := chi2Q(tc.x, tc.v); math.Abs(got-tc.want) > 1e-4 {
			t.Errorf("chi2Q(%v, %d) = %v, want %v", tc.x, tc.v, got, tc.want)
		}
	}
}

func TestFisherCombination(t *testing.T) {
	mk := func(ps ...float64) []clue {
		var c []clue
		for i, p := range ps {
			c = append(c, clue{i, p})
		}
		return c
	}
	if p := fisher(mk(0.99, 0.98, 0.95, 0.99, 0.9)); p < 0.99 {
		t.Errorf("spammy clues: %v", p)
	}
	if p := fisher(mk(0.01, 0.02, 0.05, 0.01, 0.1)); p > 0.01 {
		t.Errorf("hammy clues: %v", p)
	}
	if p := fisher(mk(0.99, 0.01, 0.99, 0.01)); math.Abs(p-0.5) > 0.05 {
		t.Errorf("mixed clues: %v, want about 0.5", p)
	}
	if p := fisher(nil); p != 0.5 {
		t.Errorf("no clues: %v", p)
	}
}

func TestTokenProb(t *testing.T) {
	if p := tokenProb(0, 0, 10, 10); p != 0.5 {
		t.Fatalf("unseen token: %v", p)
	}
	// One sighting moves it less than ten do (Robinson's prior).
	one, ten := tokenProb(1, 0, 100, 100), tokenProb(10, 0, 100, 100)
	if !(0.5 < one && one < ten && ten < 1) {
		t.Fatalf("one %v ten %v", one, ten)
	}
	// Class sizes are normalised: 10 of 1000 spam vs 10 of 100 ham is hammy.
	if p := tokenProb(10, 10, 1000, 100); p >= 0.5 {
		t.Fatalf("unnormalised: %v", p)
	}
}

func TestModelLearnUntrainPrune(t *testing.T) {
	m := NewModel(100)
	a := hashTokens([]string{"cheap", "pills", "now"})
	m.learn(a, true, 1)
	m.learn(a, true, 1)
	m.learn(hashTokens([]string{"meeting", "now"}), false, 1)
	if s, h := m.Counts(); s != 2 || h != 1 || m.Size() != 4 {
		t.Fatalf("counts %d %d size %d", s, h, m.Size())
	}
	if c := m.tokens[hashToken("now")]; c.spam != 2 || c.ham != 1 {
		t.Fatalf("now: %+v", c)
	}
	m.learn(a, true, -1)
	m.learn(a, true, -1)
	if s, _ := m.Counts(); s != 0 || m.Size() != 2 {
		t.Fatalf("after untrain: spam %d size %d", s, m.Size())
	}
	// Untraining what was never trained cannot go negative.
	m.learn(a, true, -1)
	if s, _ := m.Counts(); s != 0 {
		t.Fatalf("negative count %d", s)
	}
	// Pruning: frequent tokens survive, the model stays bounded.
	frequent := hashTokens([]string{"keep1", "keep2"})
	for i := 0; i < 5; i++ {
		m.learn(frequent, false, 1)
	}
	for i := 0; i < 500; i++ {
		m.learn([]uint64{uint64(i)*7919 + 13}, true, 1)
		if m.Size() > 100 {
			t.Fatalf("size %d above bound", m.Size())
		}
	}
	for _, h := range frequent {
		if m.tokens[h].ham != 5 {
			t.Fatal("frequent token pruned")
		}
	}
}

func TestModelRoundTripAndDamage(t *testing.T) {
	m := NewModel(0)
	for i := 0; i < 50; i++ {
		m.learn([]uint64{uint64(i), uint64(i * 1000003)}, i%2 == 0, 1)
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	got, err := readModel(data, 0)
	if err != nil || CheckModel(data) != nil {
		t.Fatal(err)
	}
	if got.nspam != m.nspam || got.nham != m.nham || got.Size() != m.Size() {
		t.Fatalf("round trip: %d/%d/%d vs %d/%d/%d", got.nspam, got.nham, got.Size(), m.nspam, m.nham, m.Size())
	}
	for h, c := range m.tokens {
		if got.count(h) != c {
			t.Fatalf("token %x: %+v vs %+v", h, got.count(h), c)
		}
	}
	for _, damage := range []func([]byte) []byte{
		func(b []byte) []byte { b[20] ^= 0x40; return b },          // flipped bit
		func(b []byte) []byte { return b[:len(b)-7] },              // truncated
		func(b []byte) []byte { b[len(modelMagic)] = 9; return b }, // other version
		func(b []byte) []byte { return []byte("not a model") },
	} {
		d := damage(bytes.Clone(data))
		if err := CheckModel(d); !errors.Is(err, ErrBadModel) {
			t.Errorf("damaged model accepted: %v", err)
		}
	}
}
