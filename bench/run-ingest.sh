#!/usr/bin/env bash
# Ingest benchmark: builds pimail, starts it on a temporary data directory
# with free loopback ports, measures idle RSS (2 s after ready), runs
# bench/ingest against it, measures peak RSS (VmHWM), stops it and prints
# everything, with the machine it ran on.
#
#   bash bench/run-ingest.sh                 # 1000 x 8 KiB over 10 connections
#   N=5000 SIZE=65536 CONNS=50 bash bench/run-ingest.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

N=${N:-1000}
SIZE=${SIZE:-8192}
CONNS=${CONNS:-10}
RCPTS=${RCPTS:-1}

tmp=$(mktemp -d)
pid=""
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

status_kib() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "building pimail and bench/ingest"
CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/ingest" ./bench/ingest

data="$tmp/data"
"$tmp/pimail" init --data "$data" >/dev/null
"$tmp/pimail" domain add --data "$data" localhost >/dev/null
rcpts=""
for i in $(seq "$RCPTS"); do
	addr="me@localhost"
	((i > 1)) && addr="me$i@localhost"
	"$tmp/pimail" account add --data "$data" --password bench-password-1 "$addr" >/dev/null
	rcpts+="${rcpts:+,}$addr"
done
smtp="127.0.0.1:$(free_port)"
imap="127.0.0.1:$(free_port)"

"$tmp/pimail" serve --data "$data" --hostname bench.local --smtp "$smtp" --imap "$imap" \
	--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --managesieve "" --http "" --https "" \
	2>"$tmp/server.log" &
pid=$!
for _ in $(seq 300); do
	grep -q 'pimail: ready' "$tmp/server.log" && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log"; echo "pimail exited"; exit 1; }
	sleep 0.1
done
grep -q 'pimail: ready' "$tmp/server.log" || { cat "$tmp/server.log"; echo "pimail not ready after 30 s"; exit 1; }
sleep 2
idle=$(status_kib "$pid" VmRSS)

cmd=("$tmp/ingest" -smtp "$smtp" -n "$N" -size "$SIZE" -conns "$CONNS" -rcpt "$rcpts")
set +e
out=$("${cmd[@]}" 2>&1)
rc=$?
set -e
peak=$(status_kib "$pid" VmHWM)
after=$(status_kib "$pid" VmRSS)
blobs=$(find "$data/blobs" -type f -not -path "$data/blobs/tmp/*" 2>/dev/null | wc -l)
disk=$(du -sk "$data" | cut -f1)

echo
echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine:  $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -m)"
echo "go:       $(go version | cut -d' ' -f3)"
echo "command:  N=$N SIZE=$SIZE CONNS=$CONNS RCPTS=$RCPTS bash bench/run-ingest.sh"
echo "          (ingest -smtp $smtp -n $N -size $SIZE -conns $CONNS -rcpt $rcpts)"
echo "$out"
echo "RSS idle (2 s after ready): $((idle / 1024)) MiB ($idle KiB)"
echo "RSS peak (VmHWM):           $((peak / 1024)) MiB ($peak KiB)"
echo "RSS after the run:          $((after / 1024)) MiB ($after KiB)"
echo "data dir: $((disk / 1024)) MiB, $blobs blob files"
if ((rc != 0)); then
	echo "ingest failed (exit $rc); server log tail:"
	tail -20 "$tmp/server.log"
	exit "$rc"
fi
