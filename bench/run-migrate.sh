#!/usr/bin/env bash
# Migration of a data directory into PostgreSQL, with a client that
# synchronised before: builds pimail, starts a PostgreSQL of its own
# (bench/pgserver), imports MBOX into me@localhost of a fresh SQLite data
# directory, flags some messages over IMAP, syncs a Maildir with mbsync
# (two-way), notes every message's UID, flags, size and Message-ID over
# IMAP, migrates with `pimail migrate` (timed, verified), serves the
# PostgreSQL store, notes the same again and syncs again: mbsync must
# find nothing to fetch or change (no full resync), then exactly the one
# message delivered afterwards.
#
#   bash bench/run-migrate.sh                      # the 21k-message mailbox
#   MBOX=/work/shared/corpus/mailbox/mailbox-1k.mbox bash bench/run-migrate.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

MBOX=${MBOX:-${PIMAIL_CORPUS:-/work/shared/corpus}/mailbox/mailbox-21k.mbox}
[[ -f $MBOX ]] || { echo "no mailbox at $MBOX (set MBOX or PIMAIL_CORPUS): skipped"; exit 0; }
command -v mbsync >/dev/null || { echo "mbsync (isync) not installed"; exit 1; }

tmp=$(mktemp -d)
pid="" pgpid=""
stop() { # PID: SIGTERM, then SIGKILL after 10 s
	[[ -n $1 ]] && kill -0 "$1" 2>/dev/null || return 0
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null || true
}
cleanup() { stop "$pid"; stop "$pgpid"; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "building pimail and bench/pgserver"
CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/pgserver" ./bench/pgserver
"$tmp/pgserver" -n 1 >"$tmp/pg.out" 2>"$tmp/pg.err" &
pgpid=$!
for _ in $(seq 600); do grep -q '^ready$' "$tmp/pg.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready$' "$tmp/pg.out" || { cat "$tmp/pg.err"; echo "PostgreSQL did not start"; exit 1; }
url=$(head -1 "$tmp/pg.out")

data="$tmp/data"
pw=bench-password-1
"$tmp/pimail" init --data "$data" >/dev/null
"$tmp/pimail" domain add --data "$data" localhost >/dev/null
"$tmp/pimail" account add --data "$data" --password "$pw" me@localhost >/dev/null
echo "importing $(basename "$MBOX")"
/usr/bin/time -f "import: %e s, max RSS %M KiB" "$tmp/pimail" import mbox --data "$data" --account me@localhost --mailbox INBOX "$MBOX" | tail -2

imap="127.0.0.1:$(free_port)"
serve() { # [--database URL]
	"$tmp/pimail" serve --data "$data" --hostname bench.local --smtp "127.0.0.1:$smtp_port" --imap "$imap" \
		--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --managesieve "" --http "" --https "" \
		"$@" 2>"$tmp/server.log" &
	pid=$!
	for _ in $(seq 600); do grep -q 'pimail: ready' "$tmp/server.log" && return; sleep 0.1; done
	cat "$tmp/server.log"; echo "pimail not ready"; exit 1
}
smtp_port=$(free_port)

# What a client sees: UID, FLAGS, size and Message-ID of every message,
# with UIDVALIDITY, UIDNEXT and HIGHESTMODSEQ.
cat >"$tmp/snapshot.py" <<'PY'
import imaplib, sys, hashlib, re
host, port = sys.argv[1].rsplit(":", 1)
c = imaplib.IMAP4(host, int(port))
c.login("me@localhost", sys.argv[2])
c.enable("CONDSTORE")
typ, _ = c.select("INBOX")
st = c.status("INBOX", "(UIDVALIDITY UIDNEXT HIGHESTMODSEQ MESSAGES)")[1][0].decode()
if sys.argv[3] == "flag":
    uids = c.uid("SEARCH", None, "ALL")[1][0].split()
    c.uid("STORE", b",".join(uids[::97]).decode(), "+FLAGS", r"(\Seen $Bench)")
    c.uid("STORE", b",".join(uids[4::211]).decode(), "+FLAGS", r"(\Flagged)")
typ, data = c.uid("FETCH", "1:*", "(UID FLAGS RFC822.SIZE MODSEQ BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
lines = [d[0].decode("latin-1") + d[1].decode("latin-1").strip() for d in data if isinstance(d, tuple)]
h = hashlib.sha256("\n".join(lines).encode()).hexdigest()
print(st, "fetch lines", len(lines), "sha256", h)
PY

cat >"$tmp/mbsyncrc" <<EOF2
IMAPAccount bench
Host ${imap%:*}
Port ${imap#*:}
User me@localhost
Pass $pw
SSLType None
AuthMechs LOGIN
PipelineDepth 50

IMAPStore remote
Account bench

MaildirStore local
Path $tmp/mail/
Inbox $tmp/mail/INBOX

Channel inbox
Far :remote:INBOX
Near :local:INBOX
Create Near
Sync All
SyncState *
EOF2
mkdir -p "$tmp/mail"
sync() { HOME=$tmp /usr/bin/time -f "mbsync: %e s" mbsync -c "$tmp/mbsyncrc" -a 2>&1 | grep -Ev "^(Opening|Connecting|Selecting|Synchronizing|Logging|Loading|C:|B:|M:|S:)" | grep -v "in the clear" | tr '\n' ' '
	echo "-> $(find "$tmp/mail/INBOX/cur" "$tmp/mail/INBOX/new" -type f | wc -l) messages in the Maildir"; }

serve
python3 "$tmp/snapshot.py" "$imap" "$pw" flag >/dev/null
before=$(python3 "$tmp/snapshot.py" "$imap" "$pw" read)
echo "before (SQLite): $before"
echo "first mbsync (full download):"
sync
stop "$pid"; pid=""

echo "migrating"
"$tmp/pimail" migrate --data "$data" --to "$url" --dry-run
/usr/bin/time -f "migrate: %e s, max RSS %M KiB" "$tmp/pimail" migrate --data "$data" --to "$url"

psql=$(compgen -G '/usr/lib/postgresql/*/bin/psql' | tail -1)
echo "PostgreSQL store: $("$psql" -At "$url" -c "SELECT 'database ' || pg_size_pretty(pg_database_size(current_database())) || '; blob_data ' || pg_size_pretty(pg_total_relation_size('blob_data')) || ', blob_text ' || pg_size_pretty(pg_relation_size('blob_text') + coalesce(pg_relation_size(reltoastrelid), 0)) || ' + trigram indexes ' || pg_size_pretty(pg_relation_size('blob_text_body') + pg_relation_size('blob_text_header')) || ', blob_meta ' || pg_size_pretty(pg_total_relation_size('blob_meta')) || ', mail ' || pg_size_pretty(pg_total_relation_size('mail')) FROM pg_class WHERE relname = 'blob_text'")"
serve --database "$url"
after=$(python3 "$tmp/snapshot.py" "$imap" "$pw" read)
echo "after (PostgreSQL): $after"
if [[ $before == "$after" ]]; then echo "identical: UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ, every UID, FLAGS, MODSEQ, size and Message-ID"; else echo "DIFFERENT"; exit 1; fi
echo "second mbsync (after the move; nothing to do):"
sync
printf 'From: a@example.org\r\nSubject: after the move\r\n\r\nhello\r\n' >"$tmp/new.eml"
python3 - "$smtp_port" "$tmp/new.eml" <<'PY'
import smtplib, sys
with smtplib.SMTP("127.0.0.1", int(sys.argv[1])) as s:
    s.sendmail("a@example.org", ["me@localhost"], open(sys.argv[2], "rb").read())
PY
echo "third mbsync (one new message):"
sync
echo
echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine:  $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command:  MBOX=$MBOX bash bench/run-migrate.sh"
