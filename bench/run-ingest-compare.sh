#!/usr/bin/env bash
# Spam-aware SMTP ingest: pimail against Postfix + Dovecot, same workloads,
# same run, back to back (pimail then the peer, repeated REPS times).
#
#   bash bench/run-ingest-compare.sh                 # everything (~20 min)
#   DUR=10 REPS=1 bash bench/run-ingest-compare.sh   # quicker, noisier
#   ONLY="burst spaced" bash bench/run-ingest-compare.sh
#
# Builds pimail and bench/smtpload, starts pimail on a temporary data
# directory with free loopback ports (domain bench.test, user1..user20,
# password benchpass: the same accounts as the peer), sets up and starts the
# Postfix + Dovecot peer with /work/shared/peers/postfix-dovecot's scripts
# (the first run installs Debian packages), runs the workloads, prints the
# ratio table and stops everything it started. Needs root (the peer's
# scripts and /proc/PID/io of the peer's processes).
#
# Workloads (labels SERVER/WORKLOAD in the JSON lines):
#   closed-C      closed loop, 8 KiB, C = 10/50/100 kept connections, DUR s,
#                 every INBOX watched (NOOP every 100 ms): accepted vs delivered
#   burst-S       seed 000: 50 messages of S = 8/16/32/64 KiB at once over 10
#                 connections, end-to-end latency (INBOX polled every 10 ms)
#   spaced-S      the same 50 (8 KiB; SPACED_N of the larger sizes) one per
#                 second; pimail and the peer run at the same time (1 msg/s each)
#   spaced-8k-idle  SPACED_N of 8 KiB one per second, INBOX watched with IDLE
#                 (how mail clients are told of new mail) instead of NOOP polls
#   bounce-B      B = 0/50/90 % of transactions to unknown users, 50
#                 connections, one transaction per connection, DUR s, CPU
#                 read after the server went idle (Postfix's queue drained)
#   rcpt-R        R = 1/5/15 recipients, 300 messages over 10 connections:
#                 bytes written and CPU per accepted message
#   pi/...        pimail alone on one core (taskset -c 0, GOMAXPROCS=1,
#                 GOMEMLIMIT=256MiB): burst and spaced
# Every workload first waits (at most 180 s, -idle-first) for its server to
# go idle, so that neither is charged for work left over from the one
# before: pimail's word index of the messages of the last run, which it
# defers while deliveries go on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

DUR=${DUR:-15}
REPS=${REPS:-3}
SPACED_N=${SPACED_N:-20}
ONLY=${ONLY:-"closed burst spaced bounce rcpt pi"}
PEER=${PEER:-/work/shared/peers/postfix-dovecot}
CORPUS=${CORPUS:-/work/shared/corpus/ham}
OUT=${OUT:-/tmp/ingest-compare-$(date -u +%Y%m%d-%H%M%S).jsonl}

tmp=$(mktemp -d)
pid=""
peer_started=0
bg=()
stop_pimail() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	pid=""
}
cleanup() {
	for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
	stop_pimail
	if ((peer_started)); then "$PEER/stop.sh" >/dev/null 2>&1 || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
want() { [[ " $ONLY " == *" $1 "* ]]; }
users=$(for i in $(seq 20); do printf 'user%d@bench.test,' "$i"; done)
users=${users%,}

echo "building pimail and bench/smtpload"
CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/smtpload" ./bench/smtpload

data="$tmp/data"
"$tmp/pimail" init --data "$data" >/dev/null
"$tmp/pimail" domain add --data "$data" bench.test >/dev/null
for i in $(seq 20); do
	"$tmp/pimail" account add --data "$data" --password benchpass "user$i@bench.test" >/dev/null
done
psmtp="127.0.0.1:$(free_port)"
pimap="127.0.0.1:$(free_port)"

# start_pimail [PREFIX...]: starts pimail on the data dir, behind PREFIX
# (e.g. taskset), and waits for "pimail: ready".
start_pimail() {
	echo "--- pimail start: $*" >>"$tmp/server.log"
	local from
	from=$(wc -l <"$tmp/server.log")
	"$@" "$tmp/pimail" serve --data "$data" --hostname mail.bench.test --smtp "$psmtp" --imap "$pimap" \
		--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --managesieve "" --http "" --https "" \
		2>>"$tmp/server.log" &
	pid=$!
	for _ in $(seq 300); do
		tail -n +"$from" "$tmp/server.log" | grep -q 'pimail: ready' && return 0
		kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log"; echo "pimail exited"; exit 1; }
		sleep 0.1
	done
	echo "pimail not ready after 30 s"
	exit 1
}
: >"$tmp/server.log"
start_pimail env

peer_pids=""
if want closed || want burst || want spaced || want bounce || want rcpt; then
	echo "setting up the Postfix + Dovecot peer ($PEER)"
	if postfix -c "$PEER/run/postfix" status >/dev/null 2>&1 ||
		{ [[ -f $PEER/run/dovecot-base/master.pid ]] && kill -0 "$(cat "$PEER/run/dovecot-base/master.pid")" 2>/dev/null; }; then
		echo "the peer is already running (someone else's run?): stop it first" >&2
		exit 1
	fi
	"$PEER/setup.sh" >"$tmp/peer-setup.log" 2>&1 || { cat "$tmp/peer-setup.log"; exit 1; }
	"$PEER/reset-mail.sh" >/dev/null
	# Mail left queued by an interrupted run would drain into this one.
	postsuper -c "$PEER/run/postfix" -d ALL >/dev/null 2>&1 || true
	"$PEER/start.sh" >/dev/null
	peer_started=1
	peer_pids=$("$PEER/pids.sh")
	# Warm both (first connections, caches), not recorded.
	"$tmp/smtpload" -smtp "$psmtp" -users "$users" -n 100 -conns 10 >/dev/null
	"$tmp/smtpload" -smtp 127.0.0.1:2025 -users "$users" -n 100 -conns 10 >/dev/null
fi

common=(-corpus "$CORPUS" -imap-pass benchpass -json "$OUT" -idle-first 180s)
pim() { "$tmp/smtpload" -smtp "$psmtp" -imap "$pimap" -pids "$pid" "${common[@]}" "$@"; }
pfx() { "$tmp/smtpload" -smtp 127.0.0.1:2025 -imap 127.0.0.1:2143 -pids "$peer_pids" "${common[@]}" "$@"; }
# both LABEL ARGS...: pimail then the peer, same arguments.
both() {
	local l=$1
	shift
	echo "== $l  (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
	pim -label "pimail/$l" "$@" | grep -v '^{' || echo "pimail/$l failed"
	pfx -label "postfix/$l" "$@" | grep -v '^{' || echo "postfix/$l failed"
}

{
	echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(free -g | awk '/Mem:/ {print $2}') GB RAM"
	echo "go:      $(go version | cut -d' ' -f3); peer: postfix $(postconf -d mail_version 2>/dev/null | cut -d' ' -f3) / dovecot $(dovecot --version 2>/dev/null | cut -d' ' -f1)"
	echo "results: $OUT"
}

for rep in $(seq "$REPS"); do
	echo "### repetition $rep of $REPS"
	if want closed; then
		for c in 10 50 100; do
			both "closed-$c" -users "$users" -conns "$c" -duration "${DUR}s" -watch -imap-poll 100ms -wait 180s
		done
	fi
	if want burst; then
		for kb in 8 16 32 64; do
			both "burst-${kb}k" -users user1@bench.test -n 50 -conns 10 -size $((kb * 1024)) -watch -imap-poll 10ms -wait 120s
		done
	fi
	if want bounce; then
		for b in 0 50 90; do
			both "bounce-$b" -users "$users" -conns 50 -per-conn 1 -duration "${DUR}s" \
				-bounces "0.$(printf '%02d' "$b")" -settle 120s
		done
	fi
	if want rcpt; then
		for r in 1 5 15; do
			both "rcpt-$r" -users "$users" -rcpts "$r" -n 300 -conns 10 -settle 120s
		done
	fi
done

# Spaced: one message a second; both servers at once (the load is light).
if want spaced; then
	for kb in 8 16 32 64; do
		n=$SPACED_N
		((kb == 8)) && n=50
		echo "== spaced-${kb}k: $n messages 1 s apart, both servers at once  (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
		pim -label "pimail/spaced-${kb}k" -users user2@bench.test -n "$n" -conns 10 -interval 1s \
			-size $((kb * 1024)) -watch -imap-poll 10ms -wait 120s >"$tmp/sp-pim" &
		bg=($!)
		pfx -label "postfix/spaced-${kb}k" -users user2@bench.test -n "$n" -conns 10 -interval 1s \
			-size $((kb * 1024)) -watch -imap-poll 10ms -wait 120s >"$tmp/sp-pfx"
		wait "${bg[0]}"
		bg=()
		grep -v '^{' "$tmp/sp-pim" "$tmp/sp-pfx" | sed 's/^[^:]*://'
	done
	# The same, watched the way mail clients learn of new mail: IMAP IDLE
	# (RFC 2177) instead of a NOOP every 10 ms.
	echo "== spaced-8k-idle: $SPACED_N messages 1 s apart, watched with IDLE, both servers at once"
	pim -label "pimail/spaced-8k-idle" -users user2@bench.test -n "$SPACED_N" -conns 10 -interval 1s \
		-watch -imap-poll 0 -wait 120s >"$tmp/sp-pim" &
	bg=($!)
	pfx -label "postfix/spaced-8k-idle" -users user2@bench.test -n "$SPACED_N" -conns 10 -interval 1s \
		-watch -imap-poll 0 -wait 120s >"$tmp/sp-pfx"
	wait "${bg[0]}"
	bg=()
	grep -v '^{' "$tmp/sp-pim" "$tmp/sp-pfx" | sed 's/^[^:]*://'
fi

# Pi class: pimail alone on one core with a Pi's memory budget.
if want pi; then
	stop_pimail
	if ((peer_started)); then
		"$PEER/stop.sh" >/dev/null
		peer_started=0
	fi
	start_pimail env GOMAXPROCS=1 GOMEMLIMIT=256MiB taskset -c 0
	# env and taskset exec pimail: $pid is pimail's own PID.
	for rep in $(seq "$REPS"); do
		echo "== pi-class (taskset -c 0, GOMAXPROCS=1, GOMEMLIMIT=256MiB), repetition $rep  (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
		pim -label "pi/burst-8k" -users user3@bench.test -n 50 -conns 10 -watch -imap-poll 10ms | grep -v '^{' || echo pi/burst-8k failed
		pim -label "pi/burst-64k" -users user3@bench.test -n 50 -conns 10 -size 65536 -watch -imap-poll 10ms | grep -v '^{' || echo pi/burst-64k failed
		pim -label "pi/closed-50" -users "$users" -conns 50 -duration "${DUR}s" -settle 3m | grep -v '^{' || echo pi/closed-50 failed
	done
	echo "== pi-class spaced: 50 x 8 KiB 1 s apart"
	pim -label "pi/spaced-8k" -users user3@bench.test -n 50 -conns 10 -interval 1s -watch -imap-poll 10ms | grep -v '^{' || echo pi/spaced-8k failed
fi

echo
echo "### medians (pimail / Postfix+Dovecot)"
"$tmp/smtpload" compare "$OUT"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
