#!/usr/bin/env bash
# Webmail benchmark (seed paper 001): pimail and, with --peer roundcube,
# the Roundcube peer (../shared/peers/roundcube, on the Postfix + Dovecot
# peer) in the same run, each with its own load client (bench/webbench and
# the peer's rcbench) doing the same user actions.
#
#   bash bench/webbench/run.sh                    # pimail only
#   bash bench/webbench/run.sh --peer roundcube   # both, side by side
#
# DURATION (default 60s) is the load time per level; results go to
# $OUT (default /tmp/webbench-results).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="/usr/local/go/bin:$PATH"
peer=""
[[ ${1:-} == --peer ]] && peer=${2:?}
DURATION=${DURATION:-60s}
OUT=${OUT:-/tmp/webbench-results}
CORPUS=${CORPUS:-../shared/corpus/mailbox/mailbox-1k.mbox}
mkdir -p "$OUT"
tmp=$(mktemp -d)
go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/webbench" ./bench/webbench
data=$tmp/data
"$tmp/pimail" domain add --data "$data" bench.test >/dev/null
for i in $(seq 1 10); do
	echo benchpass | "$tmp/pimail" account add --data "$data" --password-stdin "user$i@bench.test" >/dev/null
done
"$tmp/pimail" serve --data "$data" --hostname bench.test --http 127.0.0.1:18090 --https "" \
	--smtp 127.0.0.1:12525 --submission "" --submissions "" --imap "" --imaps "" --pop3 "" --pop3s "" \
	>"$OUT/pimail.log" 2>&1 &
pim=$!
rc_started=""
cleanup() {
	kill $pim 2>/dev/null; wait $pim 2>/dev/null
	[[ -z $rc_started ]] || sh ../shared/peers/roundcube/stop.sh
	rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
	curl -fs -o /dev/null http://127.0.0.1:18090/login && break
	sleep 0.1
done
echo "== pimail (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
"$tmp/webbench" -base http://127.0.0.1:18090 -seed-smtp 127.0.0.1:12525 -corpus "$CORPUS" \
	-pid "$pim" -duration "$DURATION" -json "$OUT/pimail.json" | tee "$OUT/pimail.txt"

if [[ $peer == roundcube ]]; then
	rc=../shared/peers/roundcube
	pd=../shared/peers/postfix-dovecot
	[[ -d $pd/run ]] || sh "$pd/setup.sh"
	if ! { [[ -f $pd/run/dovecot-base/master.pid ]] && kill -0 "$(cat "$pd/run/dovecot-base/master.pid")" 2>/dev/null; }; then
		sh "$pd/start.sh"
	fi
	if ! { [[ -f $rc/run/nginx.pid ]] && kill -0 "$(cat "$rc/run/nginx.pid")" 2>/dev/null; }; then
		sh "$rc/setup.sh" && sh "$rc/start.sh"
		rc_started=1
	fi
	python3 "$rc/bench/seed.py" --mbox "$CORPUS"
	(cd "$rc/bench" && go build -o "$tmp/rcbench" .)
	echo "== roundcube (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
	"$tmp/rcbench" -mode all -corpus "$CORPUS" -duration "$DURATION" \
		-web-pids "$(sh "$rc/pids.sh")" -dovecot-pid "$(cat "$pd/run/dovecot-base/master.pid")" \
		-json "$OUT/roundcube.json" | tee "$OUT/roundcube.txt"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
