// Package spamsplit reads the labelled part of the shared corpus and
// splits it for the spam benchmarks (bench/spamacc, bench/spamcompare):
// the corpus' own random split, a time-ordered one and two cross-source
// ones, so that both tools train and judge on the same messages.
package spamsplit

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"pimail/internal/message"
)

// The splits spamacc evaluates on. The corpus' own split (train.txt /
// test.txt, by a hash of the file name) mixes every period and source
// into both halves, so a filter that learns the period and the source
// scores well on it and badly on later mail. The time-ordered and
// cross-source splits ask what the future asks: train on what came
// before, judge on what came after, or on another source altogether.
const (
	Random = "random" // train.txt / test.txt
	Time   = "time"   // per source: oldest 70 % train, newest 30 % test
	SATrec = "sa>trec"
	TrecSA = "trec>sa"
)

// All lists the splits in report order.
var All = []string{Random, Time, SATrec, TrecSA}

// Sources are the corpus' sources, by file name prefix.
var Sources = []string{"sa-", "trec07p-"}

// Sample is one labelled message.
type Sample struct {
	Path string // relative to the corpus, e.g. "ham/sa-easy-ham-1-00002.….eml"
	Spam bool
	Raw  []byte
}

// Name is the file name.
func (s Sample) Name() string { return filepath.Base(s.Path) }

// ReadList reads a split file of the corpus (train.txt, test.txt): lines
// of "<path>\t<label>".
func ReadList(corpus, name string) ([]Sample, error) {
	fh, err := os.Open(filepath.Join(corpus, name))
	if err != nil {
		return nil, fmt.Errorf("read split: %w", err)
	}
	defer fh.Close()
	var out []Sample
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		path, label, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(corpus, path))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		out = append(out, Sample{Path: path, Spam: label == "spam", Raw: raw})
	}
	return out, sc.Err()
}

// timeTrainShare is the share of each source, oldest first, that the
// time-ordered split trains on (the same 70 % as the corpus' own split).
const timeTrainShare = 0.7

// source is the corpus source a file belongs to: "sa-" (SpamAssassin
// public corpus, 2002) or "trec07p-" (TREC 2007).
func Source(s Sample) string {
	if strings.HasPrefix(s.Name(), "trec07p-") {
		return "trec07p-"
	}
	return "sa-"
}

// receipt is when the collector received a message: the date of the
// topmost Received field (RFC 5321 §4.4: after the last ";"), or the
// Date field when that is missing or unreadable; zero when neither is.
func Receipt(raw []byte) time.Time {
	p := message.Parse(raw)
	hdrEnd := min(max(int(p.Body.BodyStart), 0), len(raw))
	for _, f := range message.HeaderFields(raw[:hdrEnd]) {
		if !strings.EqualFold(f.Name, "Received") {
			continue
		}
		v := f.Unfolded()
		if i := strings.LastIndexByte(v, ';'); i >= 0 {
			if t, ok := message.ParseDate(strings.TrimSpace(v[i+1:])); ok {
				return t
			}
		}
		break // only the topmost
	}
	return p.Date
}

// timeOrder sorts one source's messages oldest first. TREC 2007 files
// are numbered in the order the server received them (its README), so
// the number is the order; SpamAssassin files by their receipt time,
// messages without one last-but-stable by name (there are few).
func timeOrder(msgs []Sample) {
	keys := make(map[string]time.Time, len(msgs))
	for _, s := range msgs {
		keys[s.Path] = Receipt(s.Raw)
	}
	sort.SliceStable(msgs, func(i, j int) bool {
		a, b := msgs[i], msgs[j]
		if Source(a) == "trec07p-" && Source(b) == "trec07p-" {
			return a.Name() < b.Name() // zero-padded numbers
		}
		ta, tb := keys[a.Path], keys[b.Path]
		switch {
		case ta.IsZero() != tb.IsZero():
			return tb.IsZero()
		case !ta.Equal(tb):
			return ta.Before(tb)
		}
		return a.Path < b.Path
	})
}

// Make returns the training and test messages of a split from all
// labelled messages (train.txt and test.txt together for all but the
// random split). With validate, the test part is never returned: the
// training part is split again the same way (random: not used here,
// see the 5-fold -validate; time: the newest 2/7 of each source's
// training part; cross: the newest 30 % of the training source), so that
// choices are made without the test set.
func Make(name string, train, test []Sample, validate bool) (tr, te []Sample, err error) {
	all := append(append([]Sample(nil), train...), test...)
	bySource := map[string][]Sample{}
	for _, s := range all {
		bySource[Source(s)] = append(bySource[Source(s)], s)
	}
	for _, src := range bySource {
		timeOrder(src)
	}
	older := func(msgs []Sample, share float64) (old, recent []Sample) {
		k := int(float64(len(msgs)) * share)
		return msgs[:k], msgs[k:]
	}
	switch name {
	case Random:
		return train, test, nil
	case Time:
		for _, src := range Sources {
			old, recent := older(bySource[src], timeTrainShare)
			if validate {
				old, recent = older(old, 5.0/7)
			}
			tr, te = append(tr, old...), append(te, recent...)
		}
		return tr, te, nil
	case SATrec, TrecSA:
		from, to := "sa-", "trec07p-"
		if name == TrecSA {
			from, to = to, from
		}
		if validate {
			old, recent := older(bySource[from], timeTrainShare)
			return old, recent, nil
		}
		return bySource[from], bySource[to], nil
	}
	return nil, nil, fmt.Errorf("unknown split %q (want one of %s)", name, strings.Join(All, ", "))
}

// Describe prints a split's make-up: per source and class the counts and
// the receipt dates of the oldest and newest message.
func Describe(name string, tr, te []Sample) {
	fmt.Printf("split %s:\n", name)
	for _, part := range []struct {
		name string
		msgs []Sample
	}{{"train", tr}, {"test", te}} {
		for _, src := range Sources {
			var nspam, nham int
			var lo, hi time.Time
			for _, s := range part.msgs {
				if Source(s) != src {
					continue
				}
				if s.Spam {
					nspam++
				} else {
					nham++
				}
				t := Receipt(s.Raw)
				if t.IsZero() {
					continue
				}
				if lo.IsZero() || t.Before(lo) {
					lo = t
				}
				if t.After(hi) {
					hi = t
				}
			}
			if nspam+nham == 0 {
				continue
			}
			fmt.Printf("  %-5s %-9s %5d spam %5d ham  received %s to %s\n", part.name, src, nspam, nham,
				lo.UTC().Format("2006-01-02"), hi.UTC().Format("2006-01-02"))
		}
	}
}
