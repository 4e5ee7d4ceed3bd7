#!/usr/bin/env bash
# IMAP benchmark (seed paper 003): builds pimail and bench/imapbench,
# starts pimail on a temporary data directory and a free loopback port, and
# runs imapbench for each mbox given (default: the 1k and 9k mailboxes),
# each into a fresh mailbox, reporting the index size vs the mail size.
#
#   bash bench/run-imapbench.sh
#   bash bench/run-imapbench.sh ../shared/corpus/mailbox/mailbox-21k.mbox
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"

corpus=${CORPUS:-../shared/corpus/mailbox}
mboxes=("$@")
((${#mboxes[@]})) || mboxes=("$corpus/mailbox-1k.mbox" "$corpus/mailbox-9k.mbox")

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
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "building pimail and bench/imapbench"
CGO_ENABLED=0 go build -o "$tmp/pimail" ./cmd/pimail
go build -o "$tmp/imapbench" ./bench/imapbench

for mbox in "${mboxes[@]}"; do
	data="$tmp/data-$(basename "$mbox" .mbox)"
	"$tmp/pimail" domain add --data "$data" localhost >/dev/null
	"$tmp/pimail" account add --data "$data" --password bench-password-1 me@localhost >/dev/null
	imap="127.0.0.1:$(free_port)"
	"$tmp/pimail" serve --data "$data" --hostname bench.local --smtp "" --imap "$imap" \
		--submission "" --submissions "" --imaps "" --pop3 "" --pop3s "" --http "" --https "" \
		2>"$tmp/server.log" &
	pid=$!
	for _ in $(seq 300); do
		grep -q 'pimail: ready' "$tmp/server.log" && break
		kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log"; echo "pimail exited"; exit 1; }
		sleep 0.1
	done
	echo "== pimail $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, $(uname -m)"
	"$tmp/imapbench" -addr "$imap" -user me@localhost -pass bench-password-1 -mbox "$mbox" \
		-keep -datadir "$data" ${SETTLE:+-settle "$SETTLE"}
	kill -TERM "$pid"; wait "$pid" || true; pid=""
done
