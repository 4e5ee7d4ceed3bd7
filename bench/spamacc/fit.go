package main

import (
	"fmt"
	"math"
	"sort"

	"pimail/bench/spamsplit"
	"pimail/internal/spam"
)

// fitWeights fits a logistic regression of the label on the classifier's
// indicator, as 2p − 1, and the rule hits (0 or 1) over the scored
// messages, by gradient descent with an L2 penalty lambda on the rule
// weights, and prints the weights: log-odds points, the scale of the
// filter's score. This is how the classifier's weight and lean and the
// weights of the rules that fire often were set (-split time -validate
// -fit; docs/benchmarks.md).
func fitWeights(test []spamsplit.Sample, results []spam.Result, lambda float64) {
	type row struct {
		y    float64
		x    float64 // 2p − 1
		hits []int
	}
	index := map[string]int{}
	var names []string
	var rows []row
	count := map[string]int{}
	for i, s := range test {
		v := results[i].Message
		if v.Bayes < 0 {
			continue
		}
		r := row{x: 2*v.Bayes - 1}
		if s.Spam {
			r.y = 1
		}
		for _, h := range v.Hits {
			if len(h.Name) >= 6 && h.Name[:6] == "BAYES_" {
				continue
			}
			k, ok := index[h.Name]
			if !ok {
				k = len(names)
				index[h.Name] = k
				names = append(names, h.Name)
			}
			r.hits = append(r.hits, k)
			count[h.Name]++
		}
		rows = append(rows, r)
	}
	bias, wx := 0.0, 0.0
	w := make([]float64, len(names))
	const rate, rounds = 0.5, 3000
	for range rounds {
		var gb, gx float64
		g := make([]float64, len(names))
		for _, r := range rows {
			z := bias + wx*r.x
			for _, k := range r.hits {
				z += w[k]
			}
			d := 1/(1+math.Exp(-max(min(z, 30), -30))) - r.y
			gb += d
			gx += d * r.x
			for _, k := range r.hits {
				g[k] += d
			}
		}
		n := float64(len(rows))
		bias -= rate * gb / n
		wx -= rate * gx / n
		for k := range w {
			w[k] -= rate * (g[k] + lambda*w[k]) / n
		}
	}
	fmt.Printf("\nlogistic fit over %d messages (L2 %.1f on the rules): classifier %.2f points per unit of 2p-1, lean %.2f\n", len(rows), lambda, wx, bias)
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("  %-26s %6.2f  (%d hits)\n", n, w[index[n]], count[n])
	}
}
