#!/usr/bin/env bash
# IMAP import measurement (issue 8): loads an mbox (default
# ../shared/corpus/mailbox/mailbox-9k.mbox) into the Dovecot of the
# Postfix + Dovecot peer (../shared/peers/postfix-dovecot), spread over four
# folders with flags, keywords and internal dates set (bench/importcheck
# load), then runs `pimail import imap` into a fresh pimail data directory,
# twice, and checks:
#
#   - the first run stores every message: a dump of both accounts
#     (folder, SHA-256 of BODY[], flags, internal date per message, sorted;
#     bench/importcheck dump) is identical;
#   - the second run imports nothing and the dump is still identical;
#   - after 3 more messages are appended on Dovecot, a third run imports
#     exactly those 3.
#
# It prints the import rate (msgs/s) and peak RSS (VmHWM, from
# /usr/bin/time and from pimail's own report) of the first run, and of
# the same import over one connection (--connections 1; NO_SERIAL=1
# skips it) into another fresh data directory right after it.
#
#   flock /tmp/pimail-peer-pd.lock bash bench/run-import.sh [MBOX]
#
# Hold the peer lock around the whole script (the peer is shared). The peer
# is set up when it never was, started when it is not running and then
# stopped at the end. PEER_USER (default user19@bench.test) is emptied.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

mbox=${1:-../shared/corpus/mailbox/mailbox-9k.mbox}
peerdir=$(cd "${PEER_DIR:-../shared/peers/postfix-dovecot}" && pwd)
peer_user=${PEER_USER:-user19@bench.test}
peer_pass=${PEER_PASS:-benchpass}
peer_addr=127.0.0.1:2143

tmp=$(mktemp -d)
pid=""
peer_started=""
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
	if [[ -n $peer_started ]]; then sh "$peerdir/stop.sh"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
fail() { echo "FAIL: $*"; exit 1; }

echo "building pimail and bench/importcheck"
CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/importcheck" ./bench/importcheck

[[ -f $peerdir/run/dovecot.conf ]] || sh "$peerdir/setup.sh"
pidf=$peerdir/run/dovecot-base/master.pid
if ! { [[ -f $pidf ]] && kill -0 "$(cat "$pidf")" 2>/dev/null; }; then
	sh "$peerdir/start.sh"
	peer_started=1
fi
for _ in $(seq 100); do
	python3 -c 'import socket; socket.create_connection(("127.0.0.1", 2143), 1).close()' 2>/dev/null && break
	sleep 0.1
done
echo "== pimail $(git rev-parse --short HEAD 2>/dev/null || echo '?'), Dovecot $(dovecot --version | cut -d' ' -f1), $(nproc) cores, $(uname -m), $(date -u +%FT%TZ)"

peer=(-addr "$peer_addr" -user "$peer_user" -pass "$peer_pass")
echo "== loading $(basename "$mbox") into Dovecot ($peer_user), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$tmp/importcheck" load "${peer[@]}" -mbox "$mbox"
"$tmp/importcheck" dump "${peer[@]}" -out "$tmp/dovecot.txt"
want=$(wc -l <"$tmp/dovecot.txt")

data=$tmp/data
"$tmp/pimail" init --data "$data" >/dev/null
"$tmp/pimail" domain add --data "$data" localhost >/dev/null
"$tmp/pimail" account add --data "$data" --password bench-password-1 me@localhost >/dev/null
import() {
	echo "$peer_pass" | /usr/bin/time -f 'time: %e s elapsed, %U s user, %S s system, max RSS %M KiB' \
		"$tmp/pimail" import imap --data "${DATA:-$data}" --account me@localhost --host "$peer_addr" --insecure \
		--user "$peer_user" --password-stdin "$@" 2>&1 | grep -v '^…'
}
imported() { sed -n 's/^imported \([0-9]*\) messages.*/\1/p' <<<"$1"; }

# pimail_dump starts pimail on the data directory, dumps the account and
# stops it again (the import opens the data directory itself).
pimail_dump() {
	local imap="127.0.0.1:$(free_port)"
	"$tmp/pimail" serve --data "$data" --hostname bench.local --smtp "" --imap "$imap" \
		--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --managesieve "" --http "" --https "" \
		2>"$tmp/server.log" &
	pid=$!
	for _ in $(seq 300); do
		grep -q 'pimail: ready' "$tmp/server.log" && break
		kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log"; fail "pimail exited"; }
		sleep 0.1
	done
	"$tmp/importcheck" dump -addr "$imap" -user me@localhost -pass bench-password-1 -out "$1"
	kill -TERM "$pid"
	wait "$pid" || true
	pid=""
}

echo "== import 1 (fresh data directory), load average $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(import)
echo "$out"
[[ $(imported "$out") == "$want" ]] || fail "first import stored $(imported "$out") messages, Dovecot holds $want"
pimail_dump "$tmp/pimail.txt"
diff -q "$tmp/dovecot.txt" "$tmp/pimail.txt" >/dev/null || {
	diff "$tmp/dovecot.txt" "$tmp/pimail.txt" | head -20
	fail "the imported account differs from the Dovecot account"
}
echo "OK: all $want messages, bodies (SHA-256), flags and internal dates identical"

if [[ -z ${NO_SERIAL:-} ]]; then
	# The same import over one connection (folders one after the other),
	# right after, under the same load: what the parallel folders gain.
	echo "== import 1b: --connections 1 into another fresh data directory, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	"$tmp/pimail" init --data "$tmp/data1" >/dev/null
	"$tmp/pimail" domain add --data "$tmp/data1" localhost >/dev/null
	"$tmp/pimail" account add --data "$tmp/data1" --password bench-password-1 me@localhost >/dev/null
	out=$(DATA=$tmp/data1 import --connections 1)
	echo "$out"
	[[ $(imported "$out") == "$want" ]] || fail "the one-connection import stored $(imported "$out") messages, want $want"
	rm -rf "$tmp/data1"
fi

echo "== import 2 (re-run)"
out=$(import)
echo "$out"
[[ $(imported "$out") == 0 ]] || fail "the re-run imported $(imported "$out") messages"
pimail_dump "$tmp/pimail2.txt"
cmp -s "$tmp/dovecot.txt" "$tmp/pimail2.txt" || fail "the account changed after the re-run"
echo "OK: the re-run imported nothing, the account is unchanged"

echo "== import 3 (3 new messages on Dovecot)"
"$tmp/importcheck" load "${peer[@]}" -mbox "$mbox" -limit 3 -append 2>&1
"$tmp/importcheck" dump "${peer[@]}" -out "$tmp/dovecot3.txt"
out=$(import)
echo "$out"
[[ $(imported "$out") == 3 ]] || fail "the third run imported $(imported "$out") messages, want 3"
pimail_dump "$tmp/pimail3.txt"
cmp -s "$tmp/dovecot3.txt" "$tmp/pimail3.txt" || fail "the account differs from Dovecot after the third run"
echo "OK: the third run imported exactly the 3 new messages"

# Leave the peer's account empty for the next user.
"$tmp/importcheck" empty "${peer[@]}" || true
