#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a bounded time each.
#
#   bash test/fuzz.sh                  # every target, 10 s each
#   PIMAIL_FUZZTIME=2m bash test/fuzz.sh
#   bash test/fuzz.sh smtpserver imapwire   # only packages whose path contains a word
#
# Targets are found with grep ('func FuzzXxx(' in *_test.go), so new ones
# are picked up without editing this file. A failing input is written by
# go test to the package's testdata/fuzz/FuzzXxx/ directory: keep it there
# (commit it), it then runs as a regression case in every plain `go test`.
# Exits non-zero if any target fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"
FUZZTIME=${PIMAIL_FUZZTIME:-10s}

mapfile -t targets < <(grep -rlE '^func Fuzz[A-Za-z0-9_]+\(' --include='*_test.go' . |
	while read -r f; do
		dir=$(dirname "$f")
		grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | sed "s|^func |$dir |"
	done | sort -u)

failed=()
ran=0
for t in "${targets[@]}"; do
	dir=${t% *}
	name=${t#* }
	if (($# > 0)); then
		match=0
		for w in "$@"; do [[ $dir == *"$w"* ]] && match=1; done
		((match)) || continue
	fi
	printf '=== %s %s (%s)\n' "$dir" "$name" "$FUZZTIME"
	ran=$((ran + 1))
	out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 2s "$dir" 2>&1) && ok=1 || ok=0
	# Go's fuzzing engine can stop with "context deadline exceeded" when
	# -fuzztime ends while it is still handling a new input; that is the
	# engine, not a finding: a finding always writes its input to testdata
	# ("Failing input written to"). Count only findings.
	if ((!ok)) && [[ $out == *"context deadline exceeded"* && $out != *"Failing input written to"* ]]; then
		printf '%s\n' "$out" | grep '^fuzz: elapsed' | tail -n 1
		echo "engine stopped at the deadline without a finding: not a failure"
		continue
	fi
	printf '%s\n' "$out" | tail -n 20
	((ok)) || failed+=("$dir $name")
done

echo
echo "fuzz targets run: $ran, failed: ${#failed[@]}"
for f in "${failed[@]}"; do
	echo "FAIL $f (the failing input is in $(echo "$f" | cut -d' ' -f1)/testdata/fuzz/)"
done
((${#failed[@]} == 0))
