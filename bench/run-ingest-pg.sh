#!/usr/bin/env bash
# SMTP ingest with the store on SQLite, on PostgreSQL with one node and
# with two nodes, and Postfix + Dovecot, in one run: N messages of SIZE
# bytes over CONNS connections to one mailbox (with two nodes, half of
# the connections to each), REPS rounds alternating the four. For each:
# the accepted rate (bench/ingest: 250s per second) and the end-to-end
# rate, until the last message is in the mailbox as IMAP STATUS reports it
# (for Postfix, once its queue has delivered to Dovecot). The PostgreSQL
# server is one of its own (bench/pgserver) on this machine, and the
# database size per message is printed after the first one-node round.
#
#   bash bench/run-ingest-pg.sh                    # 2000 x 8 KiB, 10 connections, 3 rounds
#   N=5000 REPS=1 ONLY="sqlite pg1 pg2" bash bench/run-ingest-pg.sh
#
# Uses the Postfix + Dovecot peer of ../shared/peers/postfix-dovecot under
# flock /tmp/pimail-peer-pd.lock (user19@bench.test, emptied first); leave
# "peer" out of ONLY to skip it. pimail runs with its spam filter off, as
# the peer has none (and every message must land in INBOX, where the
# script counts).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

N=${N:-2000}
SIZE=${SIZE:-8192}
CONNS=${CONNS:-10}
REPS=${REPS:-3}
ONLY=${ONLY:-"sqlite pg1 pg2 peer"}
PEER=${PEER:-../shared/peers/postfix-dovecot}
if [[ " $ONLY " == *" peer "* && ! -d $PEER ]]; then
	echo "no Postfix + Dovecot peer at $PEER (set PEER): its runs skipped"
	ONLY=${ONLY/peer/}
fi

tmp=$(mktemp -d)
pids=()
pgpid=""
stop_pid() {
	[[ -n $1 ]] && kill -0 "$1" 2>/dev/null || return 0
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null || true
}
cleanup() {
	for p in "${pids[@]}"; do stop_pid "$p"; done
	stop_pid "$pgpid"
	rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
want() { [[ " $ONLY " == *" $1 "* ]]; }

echo "building pimail, bench/ingest and bench/pgserver"
CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/ingest" ./bench/ingest
go build -o "$tmp/pgserver" ./bench/pgserver
"$tmp/pgserver" -n $((2 * REPS)) >"$tmp/pg.out" 2>"$tmp/pg.err" &
pgpid=$!
for _ in $(seq 600); do grep -q '^ready$' "$tmp/pg.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready$' "$tmp/pg.out" || { cat "$tmp/pg.err"; echo "PostgreSQL did not start"; exit 1; }
mapfile -t urls < <(grep '^postgres://' "$tmp/pg.out")
printf '[spam]\nenabled = false\n' >"$tmp/pimail.toml"
psql=$(compgen -G '/usr/lib/postgresql/*/bin/psql' | tail -1)

# count HOST:PORT USER PASS: the INBOX's messages (IMAP STATUS).
count() {
	python3 - "$@" <<'PY'
import imaplib, sys, re
h, p = sys.argv[1].rsplit(":", 1)
c = imaplib.IMAP4(h, int(p)); c.login(sys.argv[2], sys.argv[3])
s = c.status("INBOX", "(MESSAGES)")[1][0].decode()
print(re.search(r"MESSAGES (\d+)", s).group(1))
PY
}

# node DIR [--database URL]: starts a pimail node, prints "SMTP IMAP PID".
node() {
	local dir=$1; shift
	local smtp="127.0.0.1:$(free_port)" imap="127.0.0.1:$(free_port)" log="$dir.log"
	"$tmp/pimail" serve --config "$tmp/pimail.toml" --data "$dir" --hostname bench.local --smtp "$smtp" --imap "$imap" \
		--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --managesieve "" --http "" --https "" \
		"$@" 2>"$log" &
	local pid=$!
	for _ in $(seq 600); do grep -q 'pimail: ready' "$log" && break; sleep 0.1; done
	grep -q 'pimail: ready' "$log" || { cat "$log" >&2; echo "pimail not ready" >&2; kill "$pid"; exit 1; }
	echo "$smtp $imap $pid"
}

# run LABEL RCPT USER PASS IMAP SMTP...: ingest N split over the SMTP
# addresses, then wait until the INBOX holds N more.
run() {
	local label=$1 rcpt=$2 user=$3 pass=$4 imap=$5; shift 5
	local smtps=("$@") k=${#smtps[@]}
	local before; before=$(count "$imap" "$user" "$pass")
	local start; start=$(date +%s.%N)
	local outs=()
	for i in "${!smtps[@]}"; do
		"$tmp/ingest" -smtp "${smtps[$i]}" -n $((N / k)) -size "$SIZE" -conns $((CONNS / k)) -rcpt "$rcpt" >"$tmp/ingest-$i.out" 2>&1 &
		outs+=($!)
	done
	for p in "${outs[@]}"; do wait "$p" || true; done
	local accepted; accepted=$(date +%s.%N)
	local want=$((before + N / k * k)) have=0
	for _ in $(seq 6000); do
		have=$(count "$imap" "$user" "$pass")
		((have >= want)) && break
		sleep 0.05
	done
	local done_t; done_t=$(date +%s.%N)
	local ok; ok=$(cat "$tmp"/ingest-*.out | grep -oE 'accepted: [0-9]+' | awk '{s+=$2} END {print s+0}' || true)
	python3 -c "import sys; a,b,c,ok,n,have,want=map(float,sys.argv[1:8]); print(f'{sys.argv[8]:8s} accepted {ok:.0f}/{n:.0f} at {ok/(b-a):7.1f} msgs/s; in the mailbox {have-want+n:.0f} at {n/(c-a):7.1f} msgs/s end to end')" \
		"$start" "$accepted" "$done_t" "$ok" "$((N / k * k))" "$have" "$want" "$label" | tee -a "$tmp/results"
	rm -f "$tmp"/ingest-*.out
}

setup() { # DIR [--database URL]
	local dir=$1; shift
	(($#)) || "$tmp/pimail" init --data "$dir" >/dev/null
	"$tmp/pimail" domain add --data "$dir" "$@" localhost >/dev/null
	"$tmp/pimail" account add --data "$dir" "$@" --password bench-password-1 me@localhost >/dev/null
}

echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine:  $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command:  N=$N SIZE=$SIZE CONNS=$CONNS REPS=$REPS ONLY=\"$ONLY\" bash bench/run-ingest-pg.sh"
for rep in $(seq "$REPS"); do
	echo "== round $rep (load $(cut -d' ' -f1-3 /proc/loadavg))"
	if want sqlite; then
		setup "$tmp/sqlite$rep"
		read -r s i p < <(node "$tmp/sqlite$rep")
		pids+=("$p")
		run sqlite me@localhost me@localhost bench-password-1 "$i" "$s"
		stop_pid "$p"
	fi
	if want pg1; then
		url=${urls[$((2 * rep - 2))]}
		setup "$tmp/pg1-$rep" --database "$url"
		read -r s i p < <(node "$tmp/pg1-$rep" --database "$url")
		pids+=("$p")
		run pg-1node me@localhost me@localhost bench-password-1 "$i" "$s"
		if ((rep == 1)); then
			echo "   database: $("$psql" -At "$url" -c "SELECT pg_size_pretty(pg_database_size(current_database())) || ', ' || (pg_database_size(current_database()) / greatest(count(*), 1)) || ' bytes per message' FROM mail")"
		fi
		stop_pid "$p"
	fi
	if want pg2; then
		url=${urls[$((2 * rep - 1))]}
		setup "$tmp/pg2a-$rep" --database "$url"
		read -r s1 i1 p1 < <(node "$tmp/pg2a-$rep" --database "$url")
		read -r s2 i2 p2 < <(node "$tmp/pg2b-$rep" --database "$url")
		pids+=("$p1" "$p2")
		run pg-2node me@localhost me@localhost bench-password-1 "$i2" "$s1" "$s2"
		stop_pid "$p1"; stop_pid "$p2"
	fi
	if want peer; then
		(
			flock 9
			[[ -f $PEER/run/dovecot.conf ]] || sh "$PEER/setup.sh" >/dev/null
			started=""
			if ! python3 -c 'import socket; socket.create_connection(("127.0.0.1", 2025), 1).close()' 2>/dev/null; then
				sh "$PEER/start.sh" >/dev/null; started=1; sleep 2
			fi
			python3 - <<'PY'
import imaplib
c = imaplib.IMAP4("127.0.0.1", 2143); c.login("user19@bench.test", "benchpass")
c.select("INBOX"); c.store("1:*", "+FLAGS", r"(\Deleted)") if int(c.select("INBOX")[1][0]) else None; c.expunge()
PY
			run postfix+dovecot user19@bench.test user19@bench.test benchpass 127.0.0.1:2143 127.0.0.1:2025
			[[ -z $started ]] || sh "$PEER/stop.sh" >/dev/null
		) 9>/tmp/pimail-peer-pd.lock
	fi
done
echo
echo "medians over $REPS rounds:"
for l in sqlite pg-1node pg-2node postfix+dovecot; do
	grep "^$l " "$tmp/results" 2>/dev/null | python3 -c "
import sys, re, statistics
a=[];e=[]
for line in sys.stdin:
    m=re.findall(r'at +([0-9.]+) msgs/s', line); a.append(float(m[0])); e.append(float(m[1]))
if a: print(f'  $l: accepted {statistics.median(a):.0f} msgs/s, end to end {statistics.median(e):.0f} msgs/s')"
done
