#!/usr/bin/env bash
# SMTP server A/B: the current tree against an earlier revision (before
# pimail's own SMTP server), alternated, same machine, same hour; and the
# server CPU of a session refused at RCPT beside Postfix's (the peer) and
# bench/smtpfloor's (canned replies: the floor of a Go server; with -epoll
# one thread over raw epoll: the floor of any server, the kernel's share).
#
#   bash bench/run-smtp-ab.sh                       # OLD=be3c76d, 3 alternations
#   OLD=be3c76d REPS=5 DUR=20 bash bench/run-smtp-ab.sh
#   PEER=none bash bench/run-smtp-ab.sh             # without Postfix
#   PEER_ONLY=1 bash bench/run-smtp-ab.sh           # only pimail against Postfix
#
# Workloads (smtpload, 20 users of bench.test, password benchpass):
#   closed-50   closed loop, 8 KiB messages, 50 kept connections, DUR s:
#               accepted msgs/s and server CPU per accepted message (the
#               word index, which pimail defers, is not waited for)
#   refused     50 connections, one session each, every RCPT to an unknown
#               user (550 5.1.1), DUR s, then the server's CPU once it is
#               idle again (-settle 60s), divided by the sessions
# The peer (Postfix + Dovecot, /work/shared/peers/postfix-dovecot) is used
# under flock /tmp/pimail-peer-pd.lock, for the refused workload only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

OLD=${OLD:-be3c76d}
REPS=${REPS:-3}
DUR=${DUR:-15}
PEER=${PEER:-/work/shared/peers/postfix-dovecot}
OUT=${OUT:-/tmp/smtp-ab-$(date -u +%Y%m%d-%H%M%S).jsonl}

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	sleep 1
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
users=$(for i in $(seq 20); do printf 'user%d@bench.test,' "$i"; done)
users=${users%,}

echo "building pimail (this tree and $OLD), smtpload and smtpfloor"
CGO_ENABLED=0 go build -o "$tmp/pimail-new" ./cmd/pimail
mkdir "$tmp/old-src"
git archive "$OLD" | tar -x -C "$tmp/old-src"
(cd "$tmp/old-src" && CGO_ENABLED=0 go build -o "$tmp/pimail-old" ./cmd/pimail)
go build -o "$tmp/smtpload" ./bench/smtpload
go build -o "$tmp/smtpfloor" ./bench/smtpfloor

# start NAME: a fresh data directory and server for binary pimail-NAME;
# sets addr_NAME and pid_NAME.
start() {
	local name=$1 data="$tmp/data-$1" smtp off=()
	smtp="127.0.0.1:$(free_port)"
	# Listeners the revision knows, all off but SMTP and IMAP.
	for l in submission submissions imaps pop3 pop3s http https managesieve; do
		"$tmp/pimail-$name" serve -h 2>&1 | grep -q -- "-$l " && off+=("--$l" "")
	done
	# Admin commands want an existing store since "pimail init" exists.
	if "$tmp/pimail-$name" init -h >/dev/null 2>&1; then
		"$tmp/pimail-$name" init --data "$data" >/dev/null
	fi
	"$tmp/pimail-$name" domain add --data "$data" bench.test >/dev/null
	for i in $(seq 20); do
		"$tmp/pimail-$name" account add --data "$data" --password benchpass "user$i@bench.test" >/dev/null
	done
	"$tmp/pimail-$name" serve --data "$data" --hostname mail.bench.test --smtp "$smtp" --imap "127.0.0.1:$(free_port)" \
		"${off[@]}" 2>"$tmp/$name.log" &
	local pid=$!
	pids+=("$pid")
	for _ in $(seq 300); do
		grep -q 'pimail: ready' "$tmp/$name.log" 2>/dev/null && break
		sleep 0.1
	done
	grep -q 'pimail: ready' "$tmp/$name.log" || { cat "$tmp/$name.log"; echo "pimail-$name did not start"; exit 1; }
	printf -v "addr_$name" '%s' "$smtp"
	printf -v "pid_$name" '%s' "$pid"
}
start old
start new
floor="127.0.0.1:$(free_port)"
"$tmp/smtpfloor" -listen "$floor" &
pid_floor=$!
pids+=("$pid_floor")
efloor="127.0.0.1:$(free_port)"
"$tmp/smtpfloor" -epoll -listen "$efloor" &
pid_efloor=$!
pids+=("$pid_efloor")

{
	echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "go:      $(go version | cut -d' ' -f3); old: $OLD; new: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
	echo "results: $OUT"
}
load() { "$tmp/smtpload" -users "$users" -json "$OUT" "$@" | grep -v '^{' || echo "failed: $*"; }
closed() { load -label "$1/closed-50" -smtp "$2" -pids "$3" -conns 50 -duration "${DUR}s" -idle-first 120s; }
refused() {
	load -label "$1/refused" -smtp "$2" -pids "$3" -conns 50 -per-conn 1 -duration "${DUR}s" -bounces 1 \
		-idle-first 120s -settle 60s
}

for rep in $(seq "$REPS"); do
	[[ -n ${PEER_ONLY:-} ]] && break
	echo "### alternation $rep of $REPS (load average $(cut -d' ' -f1-3 /proc/loadavg))"
	for v in old new; do
		a=addr_$v p=pid_$v
		closed "pimail-$v" "${!a}" "${!p}"
	done
	for v in old new; do
		a=addr_$v p=pid_$v
		refused "pimail-$v" "${!a}" "${!p}"
	done
	refused smtpfloor "$floor" "$pid_floor"
	refused smtpfloor-epoll "$efloor" "$pid_efloor"
done

if [[ $PEER != none && ! -d $PEER ]]; then
	echo "no Postfix + Dovecot peer at $PEER (set PEER): its runs skipped"
elif [[ $PEER != none ]]; then
	# A private instance of the peer's Postfix configuration (run/postfix
	# as its setup.sh writes it) on a port of its own, with its own queue:
	# a peer someone else runs is not touched. Under the peer's flock all
	# the same.
	echo "### the refused workload against Postfix (the peer's configuration), alternated with pimail"
	exec 9>/tmp/pimail-peer-pd.lock
	flock 9
	[[ -f $PEER/run/postfix/main.cf ]] || "$PEER/setup.sh" >"$tmp/peer-setup.log" 2>&1 || { cat "$tmp/peer-setup.log"; exit 1; }
	chmod 755 "$tmp"
	pf="$tmp/postfix"
	mkdir -p "$pf" "$tmp/postfix-queue" "$tmp/postfix-data"
	pport=$(free_port)
	cp "$PEER/run/postfix/master.cf" "$PEER/run/postfix/vmailbox" "$pf/"
	sed -i "s|^127.0.0.1:2025 |127.0.0.1:$pport |" "$pf/master.cf"
	sed -e "s|^config_directory = .*|config_directory = $pf|" -e "s|^queue_directory = .*|queue_directory = $tmp/postfix-queue|" \
		-e "s|^data_directory = .*|data_directory = $tmp/postfix-data|" -e "s|^maillog_file = .*|maillog_file = $tmp/postfix.log|" \
		-e "s|^maillog_file_prefixes = .*|maillog_file_prefixes = $tmp|" -e "s|^syslog_name = .*|syslog_name = postfix-ab|" \
		-e "s|texthash:.*/vmailbox|texthash:$pf/vmailbox|" "$PEER/run/postfix/main.cf" >"$pf/main.cf"
	postfix -c "$pf" set-permissions >/dev/null 2>&1 || true
	postfix -c "$pf" start >/dev/null 2>&1 || { cat "$tmp/postfix.log" 2>/dev/null; echo "postfix did not start"; exit 1; }
	trap 'postfix -c "$pf" stop >/dev/null 2>&1 || true; cleanup' EXIT
	for _ in $(seq 50); do [[ -f $tmp/postfix-queue/pid/master.pid ]] && break; sleep 0.1; done
	ppid_master=$(tr -d ' ' <"$tmp/postfix-queue/pid/master.pid")
	for rep in $(seq "$REPS"); do
		refused pimail-new "$addr_new" "$pid_new"
		refused postfix "127.0.0.1:$pport" "$ppid_master"
	done
fi
