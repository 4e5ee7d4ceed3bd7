// Package spam scores incoming mail: header and structure rules with
// weights, plus a Bayesian classifier with a shared base model and a model
// per account that adjusts it. The verdict is accept (INBOX), junk (the
// recipient's Junk mailbox with $Junk) or reject (5xx during SMTP, only
// when certain).
//
// Scoring is CPU work, so Check runs in a bounded pool sized to the cores:
// a flood queues instead of thrashing the machine.
package spam

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sort"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// Action is what happens to a message for one recipient.
type Action int

const (
	Accept Action = iota // deliver to INBOX
	Junk                 // deliver to Junk with the $Junk keyword
	Reject               // refuse during the SMTP transaction (550 5.7.1)
)

func (a Action) String() string {
	switch a {
	case Junk:
		return "junk"
	case Reject:
		return "reject"
	}
	return "accept"
}

// Config holds the filter's settings; zero values take the defaults.
type Config struct {
	// Store keeps the models (and the junk ledger of JunkLearner); nil
	// keeps them in memory only.
	Store store.SpamModels
	// JunkThreshold: a score at or above it files the message as junk.
	// Default 4.
	JunkThreshold float64
	// RejectThreshold: a score at or above it rejects the message. Default 12.
	RejectThreshold float64
	// NoReject never rejects; certain spam goes to Junk too.
	NoReject bool
	// BayesWeight scales the classifier's points (see bayesPoints): about
	// the points it adds at indicator 1 and subtracts at 0. Default 11.
	BayesWeight float64
	// DNSBLPoints is the points a blocklist listing of weight 1 adds.
	// Default 3: the corpus has no blocklist answers to fit it on, so it
	// follows SpamAssassin's mass-checked scores for the Spamhaus lists
	// (2.6 to 3.3 points at its threshold of 5): a listing alone does
	// not file a message, a listing and a classifier that is unsure or
	// leans spam do.
	DNSBLPoints float64
	// RuleScores overrides rule weights by name; 0 turns a rule off.
	RuleScores map[string]float64
	// Workers bounds concurrent scoring; default runtime.GOMAXPROCS(0).
	Workers int
	// MaxTokens bounds the base model, MaxAccountTokens each account's.
	// Defaults DefaultMaxTokens and DefaultMaxTokens/4.
	MaxTokens, MaxAccountTokens int
	// NoShippedModel starts the base model empty when none was trained
	// here, instead of from the model pimail ships with (shipped.go): for
	// evaluations that train their own.
	NoShippedModel bool
	// ReloadInterval is how often the store is asked whether the loaded
	// models were saved by another process (`pimail spam train` while the
	// server runs) or node. Default 30 s; negative turns it off.
	ReloadInterval time.Duration
	Logger         *slog.Logger
}

func (c *Config) defaults() {
	if c.JunkThreshold == 0 {
		c.JunkThreshold = 4
	}
	if c.RejectThreshold == 0 {
		c.RejectThreshold = 12
	}
	if c.BayesWeight == 0 {
		c.BayesWeight = 11
	}
	if c.DNSBLPoints == 0 {
		c.DNSBLPoints = 3
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.MaxAccountTokens <= 0 {
		c.MaxAccountTokens = c.MaxTokens / 4
	}
	if c.ReloadInterval == 0 {
		c.ReloadInterval = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// DNSBLHit is one blocklist (RFC 5782) that listed the client, with the
// weight configured for it (internal/dnsbl; the SMTP server refuses a
// client whose weights reach the DNSBL threshold, so the lists that come
// this far listed it below that). The filter adds Weight × DNSBLPoints.
type DNSBLHit struct {
	List   string
	Weight float64
}

// Input is one message to score. Raw and Accounts are required; the rest
// is used when present.
type Input struct {
	Raw    []byte
	Parsed *message.Parsed // parsed Raw; parsed here when nil
	// Accounts are the local recipients; each is scored with the base
	// model plus its own.
	Accounts []int64
	MailFrom string // envelope sender, "" for bounces
	RemoteIP string
	Helo     string
	// Results of authentication steps, lower case as in
	// Authentication-Results (RFC 8601): "pass", "fail", "softfail",
	// "none"…; "" means not checked.
	SPF, DKIM, DMARC string
	// DKIMPass lists the signing domains (d=) of the DKIM signatures
	// that verify, for the sender reputation's alignment check.
	DKIMPass    []string
	DMARCPolicy string // the domain's DMARC p= ("reject", "quarantine", "none")
	DNSBL       []DNSBLHit
	// Now is the time of receipt when the message has no Received field;
	// default time.Now().
	Now time.Time
}

// Verdict is the outcome for one recipient (or for the message).
type Verdict struct {
	Score  float64
	Action Action
	// Bayes is the classifier's spam probability, or -1 when its models
	// are not trained enough to count.
	Bayes float64
	// Hits are the reasons, highest points first.
	Hits []Hit
	// Clues are the classifier's strongest tokens (for `spam check`).
	Clues []Clue
}

// Clue is one token and its spam probability.
type Clue struct {
	Token string
	Prob  float64
}

// Result is the outcome of Check.
type Result struct {
	// Message is the verdict shown in the X-Spam headers: the single
	// account's when all recipients are one account, else the base
	// model's (one stored copy serves every recipient).
	Message Verdict
	// Accounts holds each recipient account's verdict, which decides its
	// folder.
	Accounts map[int64]Verdict
	// Rejected is true when every recipient's verdict is Reject.
	Rejected bool
	Elapsed  time.Duration
}

// ReputationSource is sender reputation from a recipient's own history:
// Reputation (reputation.go) reads it from the store (people the user
// wrote to or keeps mail from are trusted, senders whose mail is in Junk
// are not). The filter asks it about the From address and the envelope
// sender and gives trusting (negative) points only to an authenticated
// one (see reputationHit); a nil source adds nothing.
type ReputationSource interface {
	// Reputation returns points (negative for a trusted sender) and a
	// reason name, or ok false when the account has no opinion.
	Reputation(ctx context.Context, accountID int64, sender string) (points float64, reason string, ok bool)
}

// Filter scores messages and holds the models. Safe for concurrent use.
type Filter struct {
	cfg        Config
	sem        chan struct{}
	models     *modelSet
	reputation ReputationSource
}

// New returns a filter and loads the base model from cfg.Store.
func New(cfg Config) (*Filter, error) {
	cfg.defaults()
	ms, err := newModelSet(cfg)
	if err != nil {
		return nil, err
	}
	return &Filter{cfg: cfg, sem: make(chan struct{}, cfg.Workers), models: ms}, nil
}

// SetReputation installs a sender reputation source (see ReputationSource).
func (f *Filter) SetReputation(r ReputationSource) { f.reputation = r }

// Config returns the effective configuration (defaults filled in).
func (f *Filter) Config() Config { return f.cfg }

// Check scores a message for each of its recipient accounts. It waits for
// a free worker, or returns ctx's error.
func (f *Filter) Check(ctx context.Context, in Input) (Result, error) {
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("spam check: waiting for a worker: %w", ctx.Err())
	}
	defer func() { <-f.sem }()
	start := time.Now()
	f.models.maybeReload()

	a := analyze(in.Raw, in.Parsed)
	rc := &ruleCtx{a: a, in: &in, now: receivedTime(a)}
	if rc.now.IsZero() {
		rc.now = in.Now
		if rc.now.IsZero() {
			rc.now = start
		}
	}
	toks := readTokens(a)
	defer putTokenSet(toks)
	ruleHits := runRules(rc, f.cfg.RuleScores, f.cfg.DNSBLPoints)
	ruleTokens(toks, rc)
	base := f.models.base()

	res := Result{Accounts: make(map[int64]Verdict, len(in.Accounts))}
	res.Rejected = len(in.Accounts) > 0
	for _, id := range in.Accounts {
		acct, err := f.models.account(id)
		if err != nil {
			f.cfg.Logger.Warn("spam model of account unreadable; scoring with the base model", "account", id, "err", err)
			acct = nil
		}
		v := f.verdict(ruleHits, toks, toks.hashes, base, acct)
		if f.reputation != nil {
			if h, ok := reputationHit(ctx, f.reputation, id, &in, a); ok {
				v.Hits = append(v.Hits, h)
				sort.SliceStable(v.Hits, func(i, j int) bool { return math.Abs(v.Hits[i].Score) > math.Abs(v.Hits[j].Score) })
				v.Score = math.Round((v.Score+h.Score)*100) / 100
				v.Action = f.action(v.Score)
			}
		}
		res.Accounts[id] = v
		if v.Action != Reject {
			res.Rejected = false
		}
	}
	if len(in.Accounts) == 1 {
		res.Message = res.Accounts[in.Accounts[0]]
	} else {
		res.Message = f.verdict(ruleHits, toks, toks.hashes, base, nil)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// readTokens tokenizes a (from the pool; putTokenSet when done) and keeps
// the letter counts the tokenizer made for the rules, so that the body
// text is read once.
func readTokens(a *analysis) *tokenSet {
	t := getTokenSet()
	t.tokenize(a)
	a.letters, a.upper = t.letters, t.upper
	a.invisible, a.mixedWords, a.scripts = t.invisible, t.mixedWords, t.scripts
	return t
}

// ruleTokens adds a token for each content rule that a message hits, so
// that the classifier learns how much each structural oddity says about
// this user's mail. Rules that read the SMTP transaction (SPF, DKIM,
// DMARC, the envelope sender) or compare the Date with the time of
// receipt are left out: training reads stored files, which have no
// transaction, and are trained long after they arrived.
func ruleTokens(t *tokenSet, rc *ruleCtx) {
	for _, r := range rules {
		if r.transaction || !r.test(rc) {
			continue
		}
		t.add2("rule:", r.name)
	}
}

// verdict adds the classifier's points for base+acct to the rule hits.
func (f *Filter) verdict(ruleHits []Hit, toks *tokenSet, hashes []uint64, base, acct *Model) Verdict {
	v := Verdict{Bayes: -1, Hits: append([]Hit(nil), ruleHits...)}
	models := []*Model{base}
	if acct != nil && acct != base {
		models = append(models, acct)
	}
	prob, clues, ok := classify(hashes, models...)
	if ok {
		v.Bayes = prob
		pts := math.Round(bayesPoints(prob, f.cfg.BayesWeight)*100) / 100
		v.Hits = append(v.Hits, Hit{bayesName(prob), pts})
		for i, c := range clues {
			if i >= 10 {
				break
			}
			v.Clues = append(v.Clues, Clue{toks.token(c.idx), c.prob})
		}
	}
	sort.SliceStable(v.Hits, func(i, j int) bool { return math.Abs(v.Hits[i].Score) > math.Abs(v.Hits[j].Score) })
	for _, h := range v.Hits {
		v.Score += h.Score
	}
	v.Score = math.Round(v.Score*100) / 100
	v.Action = f.action(v.Score)
	return v
}

func (f *Filter) action(score float64) Action {
	switch {
	case !f.cfg.NoReject && score >= f.cfg.RejectThreshold:
		return Reject
	case score >= f.cfg.JunkThreshold:
		return Junk
	}
	return Accept
}

// bayesLean is the points a trained classifier gives a message it is
// unsure about (indicator 0.5). The indicator is symmetric, but the mail
// is not: spam carries ham words (copied news, a list's vocabulary) far
// more often than ham carries spam words. A logistic fit of the verdict
// on the classifier's indicator and the rule hits over the time-ordered
// validation part (go run ./bench/spamacc -split time -validate -fit;
// docs/benchmarks.md) gave the default BayesWeight (11) and a lean of
// 0.65; 1.2 more puts the default junk threshold (4) where that
// validation's ham false positives stay at or under 0.2 %.
const bayesLean = 1.85

// bayesPoints maps the classifier's indicator p to points:
// weight·(2p−1) + bayesLean, from −9.15 at p = 0 through +1.85 at 0.5,
// capped at the weight (+11 from p ≈ 0.96 with the default), so that a
// rejection (12) still takes the rules' agreement. The indicator does
// not saturate (combine), so the points spread over the whole range.
func bayesPoints(p, weight float64) float64 {
	return min(weight*(2*p-1)+bayesLean, weight)
}

// bayesName names the probability band, e.g. BAYES_99 for p ≥ 0.99.
func bayesName(p float64) string {
	for _, b := range []struct {
		min  float64
		name string
	}{{0.999, "BAYES_999"}, {0.99, "BAYES_99"}, {0.9, "BAYES_90"}, {0.7, "BAYES_70"}, {0.3, "BAYES_50"}, {0.1, "BAYES_20"}, {0.01, "BAYES_05"}} {
		if p >= b.min {
			return b.name
		}
	}
	return "BAYES_00"
}
