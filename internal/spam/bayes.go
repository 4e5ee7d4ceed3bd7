package spam

import (
	"math"
	"slices"
	"sync"
)

// Classifier constants. The token probability follows Gary Robinson's
// "A Statistical Approach to the Spam Problem" (2003): a per-token
// estimate shrunk towards 0.5 by the strength s of the prior, combined
// with Fisher's method (inverse chi-square) into one indicator. s, the
// minimum strength and the number of clues were chosen by 5-fold
// cross-validation on the corpus' train.txt (go run ./bench/spamacc
// -validate; the mean spam recall over ham false-positive budgets of 0.1
// to 0.5 %): 50 clues rather than 150 keep a long message's many
// middling words (news copied into spam to poison word counters, or a
// newsletter's sales talk in ham) from swamping the few telling ones;
// tokens seen once still count (dropping them cost 1.4 points).
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
// counts of the given models (a base model and an account's adjustments),
// and its strongest clues, strongest first. ok is false when the models
// together have too little training.
func classify(hashes []uint64, models ...*Model) (prob float64, clues []clue, ok bool) {
	var nspam, nham float64
	for _, m := range models {
		if m == nil {
			continue
		}
		m.mu.RLock()
		defer m.mu.RUnlock()
		nspam += float64(m.nspam)
		nham += float64(m.nham)
	}
	if nspam < MinTrained || nham < MinTrained {
		return 0.5, nil, false
	}
	clues = make([]clue, 0, 64)
	for i, h := range hashes {
		var s, hm float64
		for _, m := range models {
			if m == nil {
				continue
			}
			c := m.count(h)
			s += float64(c.spam)
			hm += float64(c.ham)
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
	return fisher(clues), clues, true
}

// fisher combines token probabilities with Fisher's method as Robinson
// proposed: S and H are the confidence that the tokens are not random
// with respect to spam and to ham; the indicator is (1 + S - H) / 2.
func fisher(clues []clue) float64 {
	if len(clues) == 0 {
		return 0.5
	}
	var lnSpam, lnHam float64
	for _, c := range clues {
		p := math.Min(math.Max(c.prob, 1e-6), 1-1e-6)
		lnSpam += math.Log(1 - p)
		lnHam += math.Log(p)
	}
	n := 2 * len(clues)
	s := 1 - chi2Q(-2*lnSpam, n)
	h := 1 - chi2Q(-2*lnHam, n)
	return (1 + s - h) / 2
}

// chi2Q is the upper tail probability of the chi-square distribution with
// an even number v of degrees of freedom: Q = exp(-m) Σ_{i<v/2} m^i/i!,
// m = x/2, summed in log space so that large x does not underflow early.
func chi2Q(x float64, v int) float64 {
	if x <= 0 {
		return 1
	}
	m := x / 2
	logTerm := -m
	sum := math.Exp(logTerm)
	lm := math.Log(m)
	for i := 1; i < v/2; i++ {
		logTerm += lm - math.Log(float64(i))
		sum += math.Exp(logTerm)
	}
	return math.Min(sum, 1)
}
