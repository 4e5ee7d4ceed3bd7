package main

import (
	"fmt"
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
	splitRandom = "random" // train.txt / test.txt
	splitTime   = "time"   // per source: oldest 70 % train, newest 30 % test
	splitSATrec = "sa>trec"
	splitTrecSA = "trec>sa"
)

var allSplits = []string{splitRandom, splitTime, splitSATrec, splitTrecSA}

// timeTrainShare is the share of each source, oldest first, that the
// time-ordered split trains on (the same 70 % as the corpus' own split).
const timeTrainShare = 0.7

// source is the corpus source a file belongs to: "sa-" (SpamAssassin
// public corpus, 2002) or "trec07p-" (TREC 2007).
func source(s sample) string {
	if strings.HasPrefix(filepath.Base(s.path), "trec07p-") {
		return "trec07p-"
	}
	return "sa-"
}

// receipt is when the collector received a message: the date of the
// topmost Received field (RFC 5321 §4.4: after the last ";"), or the
// Date field when that is missing or unreadable; zero when neither is.
func receipt(raw []byte) time.Time {
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
func timeOrder(msgs []sample) {
	keys := make(map[string]time.Time, len(msgs))
	for _, s := range msgs {
		keys[s.path] = receipt(s.raw)
	}
	sort.SliceStable(msgs, func(i, j int) bool {
		a, b := msgs[i], msgs[j]
		if source(a) == "trec07p-" && source(b) == "trec07p-" {
			return filepath.Base(a.path) < filepath.Base(b.path) // zero-padded numbers
		}
		ta, tb := keys[a.path], keys[b.path]
		switch {
		case ta.IsZero() != tb.IsZero():
			return tb.IsZero()
		case !ta.Equal(tb):
			return ta.Before(tb)
		}
		return a.path < b.path
	})
}

// makeSplit returns the training and test messages of a split from all
// labelled messages (train.txt and test.txt together for all but the
// random split). With validate, the test part is never returned: the
// training part is split again the same way (random: not used here,
// see the 5-fold -validate; time: the newest 2/7 of each source's
// training part; cross: the newest 30 % of the training source), so that
// choices are made without the test set.
func makeSplit(name string, train, test []sample, validate bool) (tr, te []sample, err error) {
	all := append(append([]sample(nil), train...), test...)
	bySource := map[string][]sample{}
	for _, s := range all {
		bySource[source(s)] = append(bySource[source(s)], s)
	}
	for _, src := range bySource {
		timeOrder(src)
	}
	older := func(msgs []sample, share float64) (old, recent []sample) {
		k := int(float64(len(msgs)) * share)
		return msgs[:k], msgs[k:]
	}
	switch name {
	case splitRandom:
		return train, test, nil
	case splitTime:
		for _, src := range []string{"sa-", "trec07p-"} {
			old, recent := older(bySource[src], timeTrainShare)
			if validate {
				old, recent = older(old, 5.0/7)
			}
			tr, te = append(tr, old...), append(te, recent...)
		}
		return tr, te, nil
	case splitSATrec, splitTrecSA:
		from, to := "sa-", "trec07p-"
		if name == splitTrecSA {
			from, to = to, from
		}
		if validate {
			old, recent := older(bySource[from], timeTrainShare)
			return old, recent, nil
		}
		return bySource[from], bySource[to], nil
	}
	return nil, nil, fmt.Errorf("unknown split %q (want one of %s)", name, strings.Join(allSplits, ", "))
}

// describe prints a split's make-up: per source and class the counts and
// the receipt dates of the oldest and newest message.
func describe(name string, tr, te []sample) {
	fmt.Printf("split %s:\n", name)
	for _, part := range []struct {
		name string
		msgs []sample
	}{{"train", tr}, {"test", te}} {
		for _, src := range []string{"sa-", "trec07p-"} {
			var nspam, nham int
			var lo, hi time.Time
			for _, s := range part.msgs {
				if source(s) != src {
					continue
				}
				if s.spam {
					nspam++
				} else {
					nham++
				}
				t := receipt(s.raw)
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
