#!/usr/bin/env bash
# Soak test: builds pimail and bench/soak, starts pimail on a temporary data
# directory with free loopback ports (SMTP, submission, IMAP and HTTP on),
# creates accounts, runs the soak load against it and stops the server by
# PID. Extra arguments go to the soak program, e.g.
#
#   bash bench/soak/run.sh                          # 30 minutes, default rates
#   bash bench/soak/run.sh -duration 5m -sample 20s
#   bash bench/soak/run.sh -smtp-rate 20 -imap-rate 5 -web-rate 30
#
# PIMAIL_BIN: use this pimail binary instead of building the tree.
# USERS (default 5) accounts user1..N@localhost share the load.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="/usr/local/go/bin:$PATH"
USERS=${USERS:-5}
PASS=soak-password-1

tmp=$(mktemp -d)
pid=""
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "building pimail and bench/soak"
if [[ -n ${PIMAIL_BIN:-} ]]; then
	cp "$PIMAIL_BIN" "$tmp/pimail"  # a binary built elsewhere (another commit)
else
	CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
fi
go build -o "$tmp/soak" ./bench/soak

data=$tmp/data
"$tmp/pimail" init --data "$data" >/dev/null
"$tmp/pimail" domain add --data "$data" localhost >/dev/null
users=""
for i in $(seq 1 "$USERS"); do
	"$tmp/pimail" account add --data "$data" --password "$PASS" "user$i@localhost" >/dev/null
	users+="${users:+,}user$i@localhost"
done
smtp="127.0.0.1:$(free_port)"
sub="127.0.0.1:$(free_port)"
imap="127.0.0.1:$(free_port)"
http="127.0.0.1:$(free_port)"
"$tmp/pimail" serve --data "$data" --hostname soak.local --smtp "$smtp" --submission "$sub" --imap "$imap" \
	--http "$http" --submissions "" --imaps "" --pop3 "" --pop3s "" --managesieve "" --https "" \
	2>"$tmp/server.log" &
pid=$!
for _ in $(seq 300); do
	grep -q 'pimail: ready' "$tmp/server.log" && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log"; echo "pimail exited"; exit 1; }
	sleep 0.1
done
echo "== pimail $(git rev-parse --short HEAD 2>/dev/null || echo '?') pid $pid, $(nproc) cores, $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
"$tmp/soak" -pid "$pid" -smtp "$smtp" -imap "$imap" -http "http://$http" -users "$users" -pass "$PASS" "$@" || status=$?
echo "server log: $(wc -l <"$tmp/server.log") lines, $(grep -c 'level=ERROR' "$tmp/server.log" || true) at ERROR"
grep 'level=ERROR' "$tmp/server.log" | head -5 || true
kill -TERM "$pid"; wait "$pid" || true; pid=""
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
