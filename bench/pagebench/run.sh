#!/usr/bin/env bash
# Page times of issue 27 (bench/pagebench) on pimail and on the Roundcube
# peer with the same 10,000-message inbox: the peer's user20 is seeded by
# IMAP APPEND with the first N messages of the corpus mbox (the peer's
# seed.py), and pimail imports that very mailbox from the peer's Dovecot
# (pimail import imap). Hold both peer locks around the whole script:
#
#   flock /tmp/pimail-peer-pd.lock flock /tmp/pimail-peer-roundcube.lock bash bench/pagebench/run.sh
#
# N (default 10000) messages; REPS, BREPS: requests and Chromium loads per
# page; results in $OUT (default /tmp/pagebench-results); SHARED (default
# ../shared, beside the repository) holds the corpus and the peers. Peers
# this script starts, it stops.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="/usr/local/go/bin:$PATH"
N=${N:-10000}
OUT=${OUT:-/tmp/pagebench-results}
SHARED=${SHARED:-../shared}
[[ -d $SHARED/peers/roundcube && -d $SHARED/peers/postfix-dovecot ]] ||
	{ echo "no Roundcube and Postfix + Dovecot peers under $SHARED/peers (set SHARED): skipped"; exit 0; }
CORPUS=$(realpath "${CORPUS:-$SHARED/corpus/mailbox/mailbox-21k.mbox}")
rc=$SHARED/peers/roundcube
pd=$SHARED/peers/postfix-dovecot
mkdir -p "$OUT"
tmp=$(mktemp -d)
pim="" rc_started="" pd_started=""
cleanup() {
	[[ -z $pim ]] || { kill "$pim" 2>/dev/null; wait "$pim" 2>/dev/null || true; }
	[[ -z $rc_started ]] || sh "$rc/stop.sh"
	[[ -z $pd_started ]] || sh "$pd/stop.sh"
	rm -rf "$tmp"
}
trap cleanup EXIT
[[ -d $pd/run ]] || sh "$pd/setup.sh"
if ! { [[ -f $pd/run/dovecot-base/master.pid ]] && kill -0 "$(cat "$pd/run/dovecot-base/master.pid")" 2>/dev/null; }; then
	sh "$pd/start.sh"
	pd_started=1
fi
if ! { [[ -f $rc/run/php-fpm.pid ]] && kill -0 "$(cat "$rc/run/php-fpm.pid")" 2>/dev/null; }; then
	sh "$rc/setup.sh" >"$OUT/roundcube-setup.log" 2>&1 && sh "$rc/start.sh"
	rc_started=1
fi
python3 "$rc/bench/seed.py" --mbox "$CORPUS" --n "$N" --users user20

go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/pagebench" ./bench/pagebench
data=$tmp/data
"$tmp/pimail" init --data "$data" >/dev/null
"$tmp/pimail" domain add --data "$data" bench.test >/dev/null
echo benchpass | "$tmp/pimail" account add --data "$data" --password-stdin user20@bench.test >/dev/null
"$tmp/pimail" serve --data "$data" --hostname bench.test --http 127.0.0.1:18095 --https "" \
	--smtp "" --submission "" --submissions "" --imap "" --imaps "" --pop3 "" --pop3s "" --managesieve "" \
	>"$OUT/pimail.log" 2>&1 &
pim=$!
for _ in $(seq 1 100); do
	curl -fs -o /dev/null http://127.0.0.1:18095/login && break
	sleep 0.1
done
echo benchpass | "$tmp/pimail" import imap --data "$data" --account user20@bench.test --host 127.0.0.1:2143 --insecure \
	--user user20@bench.test --password-stdin >"$OUT/import.log" 2>&1
tail -2 "$OUT/import.log"

echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$tmp/pagebench" -pimail http://127.0.0.1:18095 -roundcube http://127.0.0.1:8081 -settle-pid "$pim" \
	-reps "${REPS:-200}" -browser-reps "${BREPS:-15}" -json "$OUT/pagebench.json" | tee "$OUT/pagebench.txt"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
