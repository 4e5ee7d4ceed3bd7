#!/usr/bin/env bash
# IMAP benchmark (seed paper 003): builds pimail and bench/imapbench,
# starts pimail on a temporary data directory and a free loopback port, and
# runs imapbench for each mbox given (default: the 1k and 9k mailboxes),
# each into a fresh mailbox, reporting the index size vs the mail size.
#
#   bash bench/run-imapbench.sh
#   bash bench/run-imapbench.sh ../shared/corpus/mailbox/mailbox-21k.mbox
#   bash bench/run-imapbench.sh --peer dovecot [MBOX...]
#   bash bench/run-imapbench.sh --postgres [--peer dovecot] [MBOX...]
#
# --postgres also runs a second pimail whose store is in PostgreSQL (a
# server of its own from bench/pgserver, a database per mbox) and measures
# it in the same run as "pimail-pg", queries interleaved with the others.
#
# --peer dovecot measures the Postfix + Dovecot peer of
# ../shared/peers/postfix-dovecot in the same run: it runs its setup.sh when
# it was never set up and its start.sh when it is not running (and then its
# stop.sh at the end), loads the same mbox into a mailbox of PEER_USER
# (default user20@bench.test, deleted afterwards) and alternates the runs
# of every query between the two servers; the output ends with a table of
# the medians and the ratio dovecot / pimail.
#
# After the queries each server loads the mbox twice more, each time into
# a mailbox deleted afterwards: with one message per APPEND and PIPELINE
# commands sent ahead of their responses (default 32, as synchronisers
# pipeline with LITERAL+; 0 skips it), and with MULTIAPPEND (RFC 3502),
# MULTIAPPEND messages per command (default 100; 0 skips it); a last table
# gives the load rates. IMAP_PORT fixes pimail's port (default: a free one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

peer=""
postgres=""
if [[ ${1:-} == --postgres ]]; then
	postgres=1
	shift
fi
if [[ ${1:-} == --peer ]]; then
	peer=${2:?"--peer needs a name (dovecot)"}
	shift 2
fi
[[ -z $peer || $peer == dovecot ]] || { echo "unknown peer $peer (known: dovecot)"; exit 2; }
peerdir=${PEER_DIR:-../shared/peers/postfix-dovecot}
peer_started=""
peer_args=()
# ensure_peer starts the peer unless it runs (another user of the shared
# peer may stop it between two mailboxes), and waits for its IMAP port.
ensure_peer() {
	[[ $peer == dovecot ]] || return 0
	[[ -f $peerdir/run/dovecot.conf ]] || sh "$peerdir/setup.sh"
	local pidf=$peerdir/run/dovecot-base/master.pid
	if ! { [[ -f $pidf ]] && kill -0 "$(cat "$pidf")" 2>/dev/null; }; then
		sh "$peerdir/start.sh"
		peer_started=1
	fi
	for _ in $(seq 100); do
		python3 -c 'import socket; socket.create_connection(("127.0.0.1", 2143), 1).close()' 2>/dev/null && break
		sleep 0.1
	done
	local fts=off
	[[ -f $peerdir/run/fts.conf ]] && fts=on
	echo "== peer: Dovecot $(dovecot --version 2>/dev/null | cut -d' ' -f1) on 127.0.0.1:2143 (fts $fts)"
	peer_args=(-peer-name dovecot -peer-addr 127.0.0.1:2143 -peer-user "${PEER_USER:-user20@bench.test}"
		-peer-pass "${PEER_PASS:-benchpass}" -fresh)
}
[[ -z $peer ]] || peerdir=$(cd "$peerdir" && pwd)

corpus=${CORPUS:-../shared/corpus/mailbox}
mboxes=("$@")
((${#mboxes[@]})) || mboxes=("$corpus/mailbox-1k.mbox" "$corpus/mailbox-9k.mbox")

tmp=$(mktemp -d)
pid="" pgpid="" pgserver=""
stop_pid() {
	if [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; then
		kill -TERM "$1" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$1" 2>/dev/null || true
	fi
}
cleanup() {
	stop_pid "$pid"
	stop_pid "$pgpid"
	stop_pid "$pgserver"
	rm -rf "$tmp"
	if [[ -n $peer_started ]]; then sh "$peerdir/stop.sh"; fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "building pimail and bench/imapbench"
CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/imapbench" ./bench/imapbench
pg_urls=()
if [[ -n $postgres ]]; then
	go build -o "$tmp/pgserver" ./bench/pgserver
	"$tmp/pgserver" -n "${#mboxes[@]}" >"$tmp/pg.out" 2>"$tmp/pg.err" &
	pgserver=$!
	for _ in $(seq 600); do grep -q '^ready$' "$tmp/pg.out" 2>/dev/null && break; sleep 0.1; done
	grep -q '^ready$' "$tmp/pg.out" || { cat "$tmp/pg.err"; echo "PostgreSQL did not start"; exit 1; }
	mapfile -t pg_urls < <(grep '^postgres://' "$tmp/pg.out")
fi

for mi in "${!mboxes[@]}"; do
	mbox=${mboxes[$mi]}
	data="$tmp/data-$(basename "$mbox" .mbox)"
	"$tmp/pimail" init --data "$data" >/dev/null
	"$tmp/pimail" domain add --data "$data" localhost >/dev/null
	"$tmp/pimail" account add --data "$data" --password bench-password-1 me@localhost >/dev/null
	imap="127.0.0.1:${IMAP_PORT:-$(free_port)}"
	"$tmp/pimail" serve --data "$data" --hostname bench.local --smtp "" --imap "$imap" \
		--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --managesieve "" --http "" --https "" \
		2>"$tmp/server.log" &
	pid=$!
	for _ in $(seq 300); do
		grep -q 'pimail: ready' "$tmp/server.log" && break
		kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log"; echo "pimail exited"; exit 1; }
		sleep 0.1
	done
	also=()
	if [[ -n $postgres ]]; then
		pgdata="$tmp/pgdata-$(basename "$mbox" .mbox)"
		pgurl=${pg_urls[$mi]}
		"$tmp/pimail" domain add --data "$pgdata" --database "$pgurl" localhost >/dev/null
		"$tmp/pimail" account add --data "$pgdata" --database "$pgurl" --password bench-password-1 me@localhost >/dev/null
		pgimap="127.0.0.1:$(free_port)"
		"$tmp/pimail" serve --data "$pgdata" --database "$pgurl" --hostname bench.local --smtp "" --imap "$pgimap" \
			--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --managesieve "" --http "" --https "" \
			2>"$tmp/server-pg.log" &
		pgpid=$!
		for _ in $(seq 300); do
			grep -qs 'pimail: ready' "$tmp/server-pg.log" && break
			kill -0 "$pgpid" 2>/dev/null || { cat "$tmp/server-pg.log"; echo "pimail (PostgreSQL) exited"; exit 1; }
			sleep 0.1
		done
		also=(-also "pimail-pg=$pgimap")
		echo "== pimail-pg: the same binary with --database (PostgreSQL $("$(compgen -G '/usr/lib/postgresql/*/bin/postgres' | tail -1)" --version | awk '{print $3}'), unix socket, same machine)"
	fi
	ensure_peer
	echo "== pimail $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, $(uname -m), $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
	"$tmp/imapbench" -addr "$imap" -user me@localhost -pass bench-password-1 -mbox "$mbox" \
		-keep -datadir "$data" ${SETTLE:+-settle "$SETTLE"} ${RUNS:+-runs "$RUNS"} \
		-pipeline "${PIPELINE:-32}" -multiappend "${MULTIAPPEND:-100}" "${also[@]}" "${peer_args[@]}"
	echo "pimail memory: $(grep -E '^(VmRSS|VmHWM)' /proc/$pid/status | tr -s ' \t' ' ' | paste -sd, -)"
	[[ -z $pgpid ]] || echo "pimail-pg memory: $(grep -E '^(VmRSS|VmHWM)' /proc/$pgpid/status | tr -s ' \t' ' ' | paste -sd, -)"
	kill -TERM "$pid"; wait "$pid" || true; pid=""
	stop_pid "$pgpid"; pgpid=""
done
