package main

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// choice is the set of queries derived from the mbox.
type choice struct {
	rare, common     string
	rareDF, commonDF int
	sender           string
	senderN          int
	day              time.Time
	dayN             int
}

// chooseQueries picks, deterministically: the words (4–12 ASCII letters)
// whose document frequency in the searchable text is closest to 1 % and to
// 25 % (ties: alphabetical), the most frequent From address and the UTC
// day with the most messages.
func chooseQueries(msgs [][]byte) choice {
	df := map[string]int{}
	senders := map[string]int{}
	days := map[time.Time]int{}
	for _, m := range msgs {
		p := message.Parse(m)
		t := store.ExtractSearchableText(m, p)
		seen := map[string]bool{}
		for _, w := range words(t.Header + " " + t.Body) {
			if !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
		for _, a := range p.Envelope.From {
			if a.Mailbox != "" && a.Host != "" {
				senders[strings.ToLower(a.Mailbox+"@"+a.Host)]++
				break
			}
		}
		if !p.Date.IsZero() {
			y, mo, d := p.Date.UTC().Date()
			days[time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)]++
		}
	}
	var c choice
	c.rare, c.rareDF = closest(df, len(msgs)/100)
	c.common, c.commonDF = closest(df, len(msgs)/4)
	c.sender, c.senderN = most(senders)
	for d, n := range days {
		if n > c.dayN || n == c.dayN && d.Before(c.day) {
			c.day, c.dayN = d, n
		}
	}
	return c
}

// words splits lower-case text into runs of 4–12 ASCII letters.
func words(s string) []string {
	var out []string
	start := -1
	for i := 0; i <= len(s); i++ {
		letter := i < len(s) && s[i] >= 'a' && s[i] <= 'z'
		if letter && start < 0 {
			start = i
		}
		if !letter && start >= 0 {
			if n := i - start; n >= 4 && n <= 12 {
				out = append(out, s[start:i])
			}
			start = -1
		}
	}
	return out
}

func closest(df map[string]int, target int) (string, int) {
	type kv struct {
		w string
		n int
	}
	var all []kv
	for w, n := range df {
		all = append(all, kv{w, n})
	}
	abs := func(x int) int { return max(x, -x) }
	slices.SortFunc(all, func(a, b kv) int {
		if c := cmp.Compare(abs(a.n-target), abs(b.n-target)); c != 0 {
			return c
		}
		return strings.Compare(a.w, b.w)
	})
	if len(all) == 0 {
		return "", 0
	}
	return all[0].w, all[0].n
}

func most(m map[string]int) (string, int) {
	best, bn := "", 0
	for k, n := range m {
		if n > bn || n == bn && k < best {
			best, bn = k, n
		}
	}
	return best, bn
}

// messageDate is the Date: of a message, for APPEND's date-time (the
// internal date), or zero.
func messageDate(m []byte) time.Time {
	end := len(m)
	if i := strings.Index(string(m[:min(len(m), 64<<10)]), "\r\n\r\n"); i >= 0 {
		end = i + 4
	}
	p := message.Parse(m[:end])
	return p.Date
}
