package spam

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
)

func TestCombine(t *testing.T) {
	mk := func(ps ...float64) []clue {
		var c []clue
		for i, p := range ps {
			c = append(c, clue{i, p})
		}
		return c
	}
	spammy := combine(mk(0.99, 0.98, 0.95, 0.99, 0.9))
	if spammy < 0.9 {
		t.Errorf("spammy clues: %v", spammy)
	}
	if p := combine(mk(0.01, 0.02, 0.05, 0.01, 0.1)); p > 0.1 {
		t.Errorf("hammy clues: %v", p)
	}
	if p := combine(mk(0.99, 0.01, 0.99, 0.01)); math.Abs(p-0.5) > 0.05 {
		t.Errorf("mixed clues: %v, want about 0.5", p)
	}
	if p := combine(nil); p != 0.5 {
		t.Errorf("no clues: %v", p)
	}
	// It does not saturate: fifty clues that each lean spam at 0.8 give
	// what five such clues give, well short of a certainty. (Fisher's
	// inverse chi-square gave 0.99999 for the fifty.)
	var many []float64
	for range 50 {
		many = append(many, 0.8)
	}
	five, fifty := combine(mk(0.8, 0.8, 0.8, 0.8, 0.8)), combine(mk(many...))
	if math.Abs(five-fifty) > 1e-9 || fifty > 0.9 || fifty < 0.6 {
		t.Errorf("five clues of 0.8: %v, fifty: %v; want the same, between 0.6 and 0.9", five, fifty)
	}
	// One strong ham clue among spam clues pulls the indicator down, but
	// does not decide it.
	if p := combine(mk(0.99, 0.99, 0.99, 0.99, 0.01)); p < 0.6 || p > spammy {
		t.Errorf("four spam clues and one ham clue: %v", p)
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

// An account's own decisions count more while they are few beside the
// base model's messages, so that a user's few Junk moves already change
// that user's verdicts.
func TestAccountWeights(t *testing.T) {
	mk := func(ns, nh uint32) *Model { m := NewModel(0); m.nspam, m.nham = ns, nh; return m }
	for _, tc := range []struct {
		base, acct *Model
		want       float64
	}{
		{mk(100, 100), mk(4, 4), 5},      // sqrt(200/8)
		{mk(100, 100), mk(0, 0), 1},      // nothing of its own
		{mk(100, 100), mk(300, 100), 1},  // more than the base: never below 1
		{mk(50000, 50000), mk(1, 1), 10}, // bounded
	} {
		if w := accountWeights([]*Model{tc.base, tc.acct}); w[0] != 1 || math.Abs(w[1]-tc.want) > 1e-9 {
			t.Errorf("base %d, account %d messages: weights %v, want [1 %v]", tc.base.nspam+tc.base.nham, tc.acct.nspam+tc.acct.nham, w, tc.want)
		}
	}
	if w := accountWeights([]*Model{mk(10, 10)}); w != [2]float64{1, 1} {
		t.Errorf("base alone: %v", w)
	}

	f, err := New(Config{Logger: quiet(), NoShippedModel: true})
	if err != nil {
		t.Fatal(err)
	}
	garden := "gardening tips for the spring season roses tulips compost"
	for i := range 100 {
		f.TrainHam(BaseAccount, synth(i, "gardening", garden))
		f.TrainSpam(BaseAccount, synth(1000+i, "offer", spamBody))
	}
	// Account 1 calls the gardening newsletter spam, five times.
	for i := range 5 {
		f.TrainSpam(1, synth(2000+i, "gardening", garden))
		f.TrainHam(1, synth(3000+i, "meeting", hamBody))
	}
	ctx := context.Background()
	r, _ := f.Check(ctx, Input{Raw: synth(4000, "gardening", garden), Accounts: []int64{1, 2}})
	// The base model's 100 hams still speak for it, but the account's
	// five decisions, counted sqrt(200/10) = 4.5 times, move it well
	// away from the others' verdict (counted once: about 0.02).
	if own, other := r.Accounts[1].Bayes, r.Accounts[2].Bayes; own < 0.1 || other > 0.01 {
		t.Errorf("gardening newsletter: the account that junked it %.3f, another %.3f", own, other)
	}
}
