#!/usr/bin/env bash
# IMAP logins per second, pimail against Dovecot, same run, alternated:
# LOGIN and AUTHENTICATE SCRAM-SHA-256 at 10 and 50 concurrent clients,
# each client connecting, logging in and out in a loop (bench/loginload).
#
#   bash bench/run-login-compare.sh                 # DUR=10 REPS=3
#   DUR=20 REPS=5 bash bench/run-login-compare.sh
#
# pimail: 20 accounts (argon2id hashes, SCRAM-SHA-256 keys), default
# settings: its login cache remembers a checked password for an hour.
# Dovecot 2.3 (Debian 12): two instances of the peer's configuration
# (/work/shared/peers/postfix-dovecot, run/dovecot.conf as its setup.sh
# writes it), started here on ports of their own with their own base and
# state directories, so that a peer someone else runs is not touched
# (under flock /tmp/pimail-peer-pd.lock all the same):
#   - dovecot-plain: the peer's passdb as it is (passwd-file with {PLAIN}
#     passwords, the cheapest check there is) and its mechanisms (PLAIN,
#     LOGIN: no SCRAM);
#   - dovecot-tuned: passwd-file with {SCRAM-SHA-256} credentials
#     (doveadm pw), auth_mechanisms plain login scram-sha-256, Dovecot's
#     auth cache on (auth_cache_size 10M, auth_cache_ttl 1 hour, the
#     counterpart of pimail's cache), and its login and imap processes
#     reused instead of forked per connection (service_count 0 and 100,
#     process_min_avail 2: the "high-performance mode" of Dovecot's login
#     process documentation; the peer has the defaults, a process each).
# Server CPU is each server's whole process tree (Dovecot's master, auth,
# imap-login and imap processes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

DUR=${DUR:-10}
REPS=${REPS:-3}
PEER=${PEER:-/work/shared/peers/postfix-dovecot}
[[ -d $PEER ]] || { echo "no Postfix + Dovecot peer at $PEER (set PEER): skipped"; exit 0; }
OUT=${OUT:-/tmp/login-compare-$(date -u +%Y%m%d-%H%M%S).jsonl}

tmp=$(mktemp -d)
chmod 755 "$tmp" # Dovecot's auth process (user dovecot) reads the users file here
pid=""
dpids=()
cleanup() {
	if [[ -n $pid ]]; then kill -TERM "$pid" 2>/dev/null || true; fi
	for p in "${dpids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	sleep 1
	rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
users=$(for i in $(seq 20); do printf 'user%d@bench.test,' "$i"; done)
users=${users%,}

echo "building pimail and bench/loginload"
CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/loginload" ./bench/loginload

data="$tmp/data"
"$tmp/pimail" init --data "$data" >/dev/null
"$tmp/pimail" domain add --data "$data" bench.test >/dev/null
for i in $(seq 20); do
	"$tmp/pimail" account add --data "$data" --password benchpass "user$i@bench.test" >/dev/null
done
pimap="127.0.0.1:$(free_port)"
"$tmp/pimail" serve --data "$data" --hostname mail.bench.test --smtp "" --imap "$pimap" \
	--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --http "" --https "" --managesieve "" 2>"$tmp/pimail.log" &
pid=$!
for _ in $(seq 300); do grep -q 'pimail: ready' "$tmp/pimail.log" && break; sleep 0.1; done

exec 9>/tmp/pimail-peer-pd.lock
flock 9
[[ -f $PEER/run/dovecot.conf ]] || "$PEER/setup.sh" >"$tmp/peer-setup.log" 2>&1 || { cat "$tmp/peer-setup.log"; exit 1; }

# dovecot NAME PORT [SCRAM]: an instance of the peer's configuration;
# sets dpid_NAME.
dovecot_instance() {
	local name=$1 port=$2 scram=${3:-} d="$tmp/$1"
	mkdir -p "$d/base" "$d/state"
	local passdb="scheme=PLAIN username_format=%u $PEER/run/users" mechs="plain login"
	if [[ -n $scram ]]; then
		: >"$d/users"
		for i in $(seq 20); do
			printf 'user%d@bench.test:%s::::::\n' "$i" "$(doveadm pw -s SCRAM-SHA-256 -p benchpass)" >>"$d/users"
		done
		passdb="username_format=%u $d/users"
		mechs="plain login scram-sha-256\nauth_cache_size = 10M\nauth_cache_ttl = 1 hour"
	fi
	sed -e "s|^base_dir = .*|base_dir = $d/base|" -e "s|^state_dir = .*|state_dir = $d/state|" \
		-e "s|^log_path = .*|log_path = $d/dovecot.log|" -e "s|^info_log_path = .*|info_log_path = $d/dovecot.log|" \
		-e "s|^instance_name = .*|instance_name = bench-$name|" -e "s|^protocols = .*|protocols = imap|" \
		-e "s|^auth_mechanisms = .*|auth_mechanisms = $mechs|" -e "s|port = 2143|port = $port|" \
		-e "s|args = scheme=PLAIN username_format=%u .*/users|args = $passdb|" \
		"$PEER/run/dovecot.conf" | grep -v '^!include_try' >"$d/dovecot.conf"
	if [[ -n $scram ]]; then
		printf 'service imap-login {\n  service_count = 0\n  process_min_avail = 2\n}\nservice imap {\n  service_count = 100\n  process_min_avail = 2\n}\n' >>"$d/dovecot.conf"
	fi
	dovecot -c "$d/dovecot.conf" || { cat "$d/dovecot.conf"; exit 1; }
	for _ in $(seq 50); do [[ -f $d/base/master.pid ]] && break; sleep 0.1; done
	dpids+=("$(cat "$d/base/master.pid")")
	printf -v "dpid_$name" '%s' "${dpids[-1]}"
}
dplain="127.0.0.1:$(free_port)"
dscram="127.0.0.1:$(free_port)"
dovecot_instance plain "${dplain##*:}"
dovecot_instance scram "${dscram##*:}" scram

{
	echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "go:      $(go version | cut -d' ' -f3); pimail $(git rev-parse --short HEAD); dovecot $(dovecot --version | cut -d' ' -f1)"
	echo "results: $OUT"
}
run() { "$tmp/loginload" -users "$users" -pass benchpass -duration "${DUR}s" "$@" | tee -a "$OUT" | grep -v '^{' || echo "failed: $*"; }
for rep in $(seq "$REPS"); do
	echo "### alternation $rep of $REPS (load average $(cut -d' ' -f1-3 /proc/loadavg))"
	for c in 10 50; do
		run -label pimail -imap "$pimap" -pids "$pid" -mech login -conns "$c"
		run -label dovecot-plain -imap "$dplain" -pids "$dpid_plain" -mech login -conns "$c"
		run -label dovecot-tuned -imap "$dscram" -pids "$dpid_scram" -mech login -conns "$c"
		run -label pimail -imap "$pimap" -pids "$pid" -mech scram -conns "$c"
		run -label dovecot-tuned -imap "$dscram" -pids "$dpid_scram" -mech scram -conns "$c"
	done
done
