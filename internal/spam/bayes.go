package spam

import (
	"math"
	"slices"
	"sync"
)

// Classifier constants. The token probability follows Gary Robinson's
// "A Statistical Approach to the Spam Problem" (2003): a per-token
// estimate shrunk towards 0.5 by the strength s of the prior, so that a
// token seen once (a hapax) or twice counts for little and an unseen one
// not at all. s, the minimum strength and the number of clues were chosen
// by 5-fold cross-validation on the corpus' train.txt (go run
// ./bench/spamacc -validate) and kept after the time-ordered validation
// (-split time -validate; SpamAssassin's constants, s = 0.16, strength
// 0.346 and 150 clues, did no better there): 50 clues rather than 150
// keep a long message's many middling words (news copied into spam to
// poison word counters, or a newsletter's sales talk in ham) from
// swamping the few telling ones; hapaxes still count (dropping them cost
// 1.4 points).
const (
	priorStrength = 0.6 // s
	priorProb     = 0.5 // x
	minStrength   = 0.2 // tokens with |f-0.5| below this are ignored
	maxClues      = 50  // strongest tokens used per message
	// MinTrained is how many spam and how many ham messages a model needs
	// before its verdict counts.
	MinTrained = 20
)

// counts are the messages of each class that contained a token.
type counts struct{ spam, ham uint32 }

// Model is a token count table. Tokens are kept as 64-bit FNV-1a hashes:
// compact, and the model file reveals no words of anyone's mail.
//
// A model read from a file is kept as a sorted table (tab: 16 bytes a
// token, about half of what a map of the same tokens takes) until it is
// trained, when it becomes a map (tokens). The base model is trained by
// `pimail spam train`, not in the server, so there it stays a table.
type Model struct {
	mu        sync.RWMutex
	nspam     uint32
	nham      uint32
	tokens    map[uint64]counts // nil while tab holds the tokens
	tab       *table
	maxTokens int
	dirty     bool
	// tracked models (those of a store) keep what they learned since
	// their last save apart, so that a save can add it to a model saved
	// by another writer meanwhile (modelsync.go).
	tracked bool
	delta   delta
}

// table is a read-only token table: hashes ascending with their counts,
// and an index of where each run of hashes with the same top bits starts,
// so a lookup is a binary search over a handful of entries.
type table struct {
	keys  []uint64
	vals  []counts
	start []uint32 // start[b]: first index whose hash has top bits b; one more entry than buckets
	shift uint     // 64 - bits of the bucket number
}

// newTable indexes keys (strictly ascending) and their counts.
func newTable(keys []uint64, vals []counts) *table {
	bits := uint(0)
	for 1<<bits < len(keys)/8 { // about 8 tokens a bucket at most
		bits++
	}
	t := &table{keys: keys, vals: vals, start: make([]uint32, 1<<bits+1), shift: 64 - bits}
	b := 0
	for i, h := range keys {
		for ; b <= int(t.bucket(h)); b++ {
			t.start[b] = uint32(i)
		}
	}
	for ; b < len(t.start); b++ {
		t.start[b] = uint32(len(keys))
	}
	return t
}

// bucket is h's bucket (a shift of 64, one bucket, gives 0 in Go).
func (t *table) bucket(h uint64) uint64 {
	return h >> t.shift
}

func (t *table) get(h uint64) counts {
	b := t.bucket(h)
	lo, hi := int(t.start[b]), int(t.start[b+1])
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if t.keys[mid] < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(t.keys) && t.keys[lo] == h {
		return t.vals[lo]
	}
	return counts{}
}

// count returns a token's counts. Called with mu held.
func (m *Model) count(h uint64) counts {
	if m.tab != nil {
		return m.tab.get(h)
	}
	return m.tokens[h]
}

// size is the number of distinct tokens. Called with mu held.
func (m *Model) size() int {
	if m.tab != nil {
		return len(m.tab.keys)
	}
	return len(m.tokens)
}

// thaw turns the table into a map before the model changes. Called with
// mu held for writing.
func (m *Model) thaw() {
	if m.tab == nil {
		return
	}
	m.tokens = make(map[uint64]counts, len(m.tab.keys))
	for i, h := range m.tab.keys {
		m.tokens[h] = m.tab.vals[i]
	}
	m.tab = nil
}

// NewModel returns an empty model that prunes itself above maxTokens
// distinct tokens (0 means DefaultMaxTokens).
func NewModel(maxTokens int) *Model {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Model{tokens: map[uint64]counts{}, maxTokens: maxTokens}
}

// DefaultMaxTokens bounds a model: 16 bytes per token in memory as a
// table, about 30 as a map, and at most 20 on disk.
const DefaultMaxTokens = 400_000

func hashTokens(toks []string) []uint64 {
	out := make([]uint64, len(toks))
	for i, t := range toks {
		out[i] = hashToken(t)
	}
	return out
}

// Counts returns the number of spam and ham messages trained.
func (m *Model) Counts() (spam, ham int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return int(m.nspam), int(m.nham)
}

// Size returns the number of distinct tokens.
func (m *Model) Size() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.size()
}

// learn adds (delta 1) or removes (delta -1) one message's tokens.
func (m *Model) learn(hashes []uint64, spam bool, delta int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.thaw()
	m.dirty = true
	ns, nh := m.nspam, m.nham
	if delta > 0 {
		if spam {
			m.nspam = satAdd(m.nspam)
		} else {
			m.nham = satAdd(m.nham)
		}
	} else if spam && m.nspam > 0 {
		m.nspam--
	} else if !spam && m.nham > 0 {
		m.nham--
	}
	m.noteMessages(int64(m.nspam)-int64(ns), int64(m.nham)-int64(nh))
	for _, h := range hashes {
		old := m.tokens[h]
		c := old
		switch {
		case delta > 0 && spam:
			c.spam = satAdd(c.spam)
		case delta > 0:
			c.ham = satAdd(c.ham)
		case spam && c.spam > 0:
			c.spam--
		case !spam && c.ham > 0:
			c.ham--
		}
		if c == old {
			continue
		}
		m.noteToken(h, int64(c.spam)-int64(old.spam), int64(c.ham)-int64(old.ham))
		m.put(h, c)
	}
	if len(m.tokens) > m.maxTokens {
		m.prune()
	}
}

// put sets a token's counts in the map; a token seen in no message goes.
// Called with mu held for writing, after thaw.
func (m *Model) put(h uint64, c counts) {
	if c.spam == 0 && c.ham == 0 {
		delete(m.tokens, h)
	} else {
		m.tokens[h] = c
	}
}

func satAdd(v uint32) uint32 {
	if v == math.MaxUint32 {
		return v
	}
	return v + 1
}

// prune drops the rarest tokens until the model holds at most 90 % of its
// bound: first those seen in one message, then two, and so on. Rare tokens
// carry the least evidence and are most of the table. Called with mu held.
func (m *Model) prune() {
	m.thaw()
	target := m.maxTokens * 9 / 10
	for limit := uint64(1); len(m.tokens) > target && limit < math.MaxUint32; limit *= 2 {
		for h, c := range m.tokens {
			if uint64(c.spam)+uint64(c.ham) <= limit {
				delete(m.tokens, h)
				if len(m.tokens) <= target {
					break
				}
			}
		}
	}
}

// clue is one token's evidence.
type clue struct {
	idx  int // index into the message's token list
	prob float64
}

// tokenProb is Robinson's f(w) for a token seen in spamCount of nspam spam
// and hamCount of nham ham messages.
func tokenProb(spamCount, hamCount, nspam, nham float64) float64 {
	n := spamCount + hamCount
	if n == 0 {
		return priorProb
	}
	sr := spamCount / math.Max(nspam, 1)
	hr := hamCount / math.Max(nham, 1)
	p := sr / (sr + hr)
	return (priorStrength*priorProb + n*p) / (priorStrength + n)
}

// classify returns the spam probability of a message from the combined
// counts of the given models (a base model and an account's adjustments,
// weighted by accountWeights),
// and its strongest clues, strongest first. ok is false when the models
// together have too little training.
func classify(hashes []uint64, models ...*Model) (prob float64, clues []clue, ok bool) {
	var nspam, nham float64
	for _, m := range models {
		if m != nil {
			m.mu.RLock()
			defer m.mu.RUnlock()
		}
	}
	weights := accountWeights(models)
	for k, m := range models {
		if m == nil {
			continue
		}
		w := weights[k]
		nspam += w * float64(m.nspam)
		nham += w * float64(m.nham)
	}
	if nspam < MinTrained || nham < MinTrained {
		return 0.5, nil, false
	}
	clues = make([]clue, 0, 64)
	for i, h := range hashes {
		var s, hm float64
		for k, m := range models {
			if m == nil {
				continue
			}
			c := m.count(h)
			w := weights[k]
			s += w * float64(c.spam)
			hm += w * float64(c.ham)
		}
		if s+hm == 0 {
			continue
		}
		f := tokenProb(s, hm, nspam, nham)
		if math.Abs(f-0.5) >= minStrength {
			clues = append(clues, clue{idx: i, prob: f})
		}
	}
	slices.SortFunc(clues, func(a, b clue) int {
		da, db := math.Abs(a.prob-0.5), math.Abs(b.prob-0.5)
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return a.idx - b.idx
	})
	if len(clues) > maxClues {
		clues = clues[:maxClues]
	}
	return combine(clues), clues, true
}

// combine joins token probabilities into one indicator by Robinson's
// geometric-mean method (the paper's section on combining the
// probabilities): P = 1 − (Π(1−f))^(1/n) and Q = 1 − (Π f)^(1/n)
// measure how spammy and how hammy the clues are, and S = (P − Q) /
// (P + Q) lies in [−1, 1]; the indicator is (1 + S) / 2. Being a mean,
// it does not saturate: fifty clues that each lean spam say what one
// such clue says, not a certainty. Fisher's method (inverse chi-square
// over the same clues, which this filter used before) goes to 0 or 1
// within a few strong tokens, so spam written like ham got −8 points as
// surely as real spam got +10; on the time-ordered split this combining
// raised recall at ham FP ≤ 0.3 % and doubled it on the cross-source
// splits (docs/benchmarks.md).
func combine(clues []clue) float64 {
	if len(clues) == 0 {
		return 0.5
	}
	var lnSpam, lnHam float64
	for _, c := range clues {
		p := math.Min(math.Max(c.prob, 1e-6), 1-1e-6)
		lnSpam += math.Log(1 - p)
		lnHam += math.Log(p)
	}
	n := float64(len(clues))
	spamness := 1 - math.Exp(lnSpam/n)
	hamness := 1 - math.Exp(lnHam/n)
	return (1 + (spamness-hamness)/(spamness+hamness)) / 2
}

// accountWeights are the weights of the models' counts: 1 for the base
// model (models[0]) and, for an account's own model (models[1]),
// sqrt(base messages / account messages) within [1, maxAccountWeight].
// A user's own decisions are few beside the thousands of messages of
// the base model (the shipped one: 6,045), and counted once each they
// would move nothing for weeks; counted more while they are few, they
// adapt the verdicts to this user's mail from the first few dozen, and
// as they grow the weight falls back towards 1. The rule was chosen on
// the time-ordered split (go run ./bench/spamacc -split time -account N
// -train-sources trec07p-: the shipped base model and N of the account's
// newest spam and ham): with 25 and 100 of each, recall on the newest
// TREC mail rose from 72.8 and 82.9 % to 74.0 and 84.8 % while ham false
// positives fell from 1.47 and 0.98 % to 0.74 and 0.25 %; with 400 it
// changed little and with 1,000 cost 0.6 points of recall.
func accountWeights(models []*Model) [2]float64 {
	w := [2]float64{1, 1}
	if len(models) < 2 || models[0] == nil || models[1] == nil {
		return w
	}
	nb := float64(models[0].nspam) + float64(models[0].nham)
	na := float64(models[1].nspam) + float64(models[1].nham)
	if na > 0 {
		w[1] = min(max(math.Sqrt(nb/na), 1), maxAccountWeight)
	}
	return w
}

// maxAccountWeight bounds how much one decision of a user counts.
const maxAccountWeight = 10
