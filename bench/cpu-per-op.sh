#!/usr/bin/env bash
# CPU time (user+system) one iteration of a Go benchmark costs, measured
# without the waiting a loaded machine adds to ns/op: the test binary runs
# N and 2N iterations under /usr/bin/time, and (CPU(2N) - CPU(N)) / N is
# one iteration's CPU. Give several trees (a checkout of main, this one)
# to compare them in one run, interleaved, ROUNDS times each.
#
#   bash bench/cpu-per-op.sh ./internal/msgauth 'BenchmarkCheck$' 4000 /tmp/main .
#   ROUNDS=5 bash bench/cpu-per-op.sh ./internal/message 'BenchmarkParseCorpus$' 20000 .
#
# The binary runs in the package's directory (benchmarks that read
# ../shared/corpus find it as go test would).
set -euo pipefail
pkg=$1 bench=$2 n=$3
shift 3
trees=("$@")
((${#trees[@]} > 0)) || trees=(.)
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in "${!trees[@]}"; do
	(cd "${trees[$i]}" && go test -c -o "$tmp/bin$i" "$pkg")
done
cpu() { # tree-index iterations
	local dir
	dir=$(cd "${trees[$1]}" && cd "$pkg" && pwd)
	(cd "$dir" && /usr/bin/time -f "%U %S" -o "$tmp/t" "$tmp/bin$1" -test.run XXX -test.bench "$bench" -test.benchtime "${2}x" >/dev/null)
	awk '{print $1 + $2}' "$tmp/t"
}
for round in $(seq "$rounds"); do
	for i in "${!trees[@]}"; do
		a=$(cpu "$i" "$n")
		b=$(cpu "$i" $((2 * n)))
		awk -v r="$round" -v t="${trees[$i]}" -v a="$a" -v b="$b" -v n="$n" \
			'BEGIN { printf "round %d  %-20s %10.1f us/op\n", r, t, (b - a) / n * 1e6 }'
	done
done
