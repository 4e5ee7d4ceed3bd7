#!/usr/bin/env bash
# Webmail benchmark (seed paper 001): pimail and, with --peer roundcube,
# the Roundcube peer (../shared/peers/roundcube, on the Postfix + Dovecot
# peer) in the same run, each with its own load client (bench/webbench and
# the peer's rcbench) doing the same user actions.
#
#   bash bench/webbench/run.sh                    # pimail only
#   flock /tmp/pimail-peer-pd.lock bash bench/webbench/run.sh --peer roundcube
#
# With the peer, hold the peers' lock around the whole script (as above):
# nobody else may deliver into the peer's users while rcbench looks for its
# seeded messages on page 1. Peers this script starts, it stops.
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
CORPUS=$(realpath "${CORPUS:-../shared/corpus/mailbox/mailbox-1k.mbox}")
mkdir -p "$OUT"
tmp=$(mktemp -d)
rc=../shared/peers/roundcube
pd=../shared/peers/postfix-dovecot
pim="" rc_started="" pd_started="" watch=""
cleanup() {
	[[ -z $watch ]] || kill "$watch" 2>/dev/null || true
	[[ -z $pim ]] || { kill "$pim" 2>/dev/null; wait "$pim" 2>/dev/null || true; }
	[[ -z $rc_started ]] || sh "$rc/stop.sh"
	[[ -z $pd_started ]] || sh "$pd/stop.sh"
	rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/webbench" ./bench/webbench
data=$tmp/data
"$tmp/pimail" init --data "$data" >/dev/null
"$tmp/pimail" domain add --data "$data" bench.test >/dev/null
for i in $(seq 1 10); do
	echo benchpass | "$tmp/pimail" account add --data "$data" --password-stdin "user$i@bench.test" >/dev/null
done
"$tmp/pimail" serve --data "$data" --hostname bench.test --http 127.0.0.1:18090 --https "" \
	--smtp 127.0.0.1:12525 --submission "" --submissions "" --imap "" --imaps "" --pop3 "" --pop3s "" --managesieve "" \
	>"$OUT/pimail.log" 2>&1 &
pim=$!
for _ in $(seq 1 100); do
	curl -fs -o /dev/null http://127.0.0.1:18090/login && break
	sleep 0.1
done

# Both sides are set up and seeded first, so that they are measured one
# right after the other.
if [[ $peer == roundcube ]]; then
	[[ -d $pd/run ]] || sh "$pd/setup.sh"
	if ! { [[ -f $pd/run/dovecot-base/master.pid ]] && kill -0 "$(cat "$pd/run/dovecot-base/master.pid")" 2>/dev/null; }; then
		sh "$pd/start.sh"
		pd_started=1
	fi
	if ! { [[ -f $rc/run/nginx.pid ]] && kill -0 "$(cat "$rc/run/nginx.pid")" 2>/dev/null; }; then
		sh "$rc/setup.sh" >"$OUT/roundcube-setup.log" 2>&1 && sh "$rc/start.sh"
		rc_started=1
	fi
	python3 "$rc/bench/seed.py" --mbox "$CORPUS"
	(cd "$rc/bench" && go build -o "$tmp/rcbench" .)
fi
"$tmp/webbench" -base http://127.0.0.1:18090 -seed-smtp 127.0.0.1:12525 -corpus "$CORPUS" -seed-only

echo "== pimail (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
"$tmp/webbench" -base http://127.0.0.1:18090 -pid "$pim" -duration "$DURATION" \
	-json "$OUT/pimail.json" | tee "$OUT/pimail.txt"

if [[ $peer == roundcube ]]; then
	echo "== roundcube (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
	# Dovecot and Postfix: what pimail's one process also does.
	"$tmp/webbench" -mem-watch "$(sh "$pd/pids.sh")" -mem-label "dovecot+postfix" -duration 1h >"$OUT/roundcube-mail-mem.txt" &
	watch=$!
	"$tmp/rcbench" -mode all -corpus "$CORPUS" -duration "$DURATION" \
		-web-pids "$(sh "$rc/pids.sh")" -dovecot-pid "$(cat "$pd/run/dovecot-base/master.pid")" \
		-json "$OUT/roundcube.json" | tee "$OUT/roundcube.txt"
	kill "$watch"
	wait "$watch" || true
	watch=""
	cat "$OUT/roundcube-mail-mem.txt"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
