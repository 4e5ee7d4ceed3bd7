#!/usr/bin/env bash
# The project's test command (README: "bash test/all.sh"); CI runs it too.
# It needs nothing beside the repository: the tests run on the generated
# corpus in testdata/corpus.
#
# Installs the client tools the tests drive (Debian's isync, mutt, neomutt, swaks,
# offlineimap3, clamav-daemon for the real-clamd test, chromium for the
# webmail browser test, postfix for the interop test, sieve-connect for
# the ManageSieve test, pebble for the ACME test, vdirsyncer for the
# CardDAV sync test, postgresql for the store on PostgreSQL) when they are
# missing,
# then: gofmt check, go vet, CGO-free builds for amd64, arm64 and armv7
# (the Raspberry Pi targets), the unit tests, the black-box tests in test/
# (which start the binary built here), and every fuzz target for a few
# seconds. It ends with the count of passed, failed and skipped tests (each
# skip with its reason) and the wall time.
# Exits non-zero if any step fails, a test fails or a skip gives no reason;
# the go test steps all run regardless, so one report shows every failure.
#
# Environment:
#   PIMAIL_TEST_SKIP_CLIENTS=1  do not install the client tools; the tests
#                               that need them skip (quick local runs only)
#   PIMAIL_FUZZTIME=4s          time per fuzz target (test/fuzz.sh alone
#                               for long runs)
#   PIMAIL_TEST_TIMEOUT=15m     bound per test binary
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$PATH"
export DEBIAN_FRONTEND=noninteractive
# Whole-suite bound per test binary; CI allows 90 minutes in all.
TEST_TIMEOUT=${PIMAIL_TEST_TIMEOUT:-15m}

start=$SECONDS
step() { printf '\n=== %s (%ds)\n' "$*" $((SECONDS - start)); }

install_clients() {
	local missing=()
	command -v mbsync >/dev/null 2>&1 || missing+=(isync)
	command -v mutt >/dev/null 2>&1 || missing+=(mutt)
	command -v neomutt >/dev/null 2>&1 || missing+=(neomutt)
	command -v swaks >/dev/null 2>&1 || missing+=(swaks)
	command -v script >/dev/null 2>&1 || missing+=(bsdutils)
	command -v python3 >/dev/null 2>&1 || missing+=(python3)
	command -v clamd >/dev/null 2>&1 || [[ -x /usr/sbin/clamd ]] || missing+=(clamav-daemon)
	command -v chromium >/dev/null 2>&1 || missing+=(chromium)
	command -v offlineimap >/dev/null 2>&1 || missing+=(offlineimap3)
	command -v pebble >/dev/null 2>&1 || missing+=(pebble)
	[[ -x /usr/sbin/postfix ]] || missing+=(postfix)
	# Mail authentication judges (issue 22): the RFC 7208 suite ships
	# in python3-spf's doc directory; dkimpy (with nacl for Ed25519 and
	# dnspython), Mail::DKIM and both Authentication-Results parsers.
	[[ -f /usr/share/doc/python3-spf/rfc7208-tests.yml.gz ]] || missing+=(python3-spf)
	/usr/bin/python3 -c 'import dkim, nacl, dns.resolver' 2>/dev/null || missing+=(python3-dkim python3-nacl python3-dnspython)
	/usr/bin/python3 -c 'import authres' 2>/dev/null || missing+=(python3-authres)
	perl -MMail::DKIM -e 1 2>/dev/null || missing+=(libmail-dkim-perl)
	perl -MMail::AuthenticationResults::Parser -e 1 2>/dev/null || missing+=(libmail-authenticationresults-perl)
	command -v sieve-connect >/dev/null 2>&1 || missing+=(sieve-connect)
	command -v vdirsyncer >/dev/null 2>&1 || missing+=(vdirsyncer)
	# PostgreSQL 15 (initdb, postgres, pg_trgm) for the store's tests on
	# PostgreSQL; they start their own server (internal/pgtest).
	compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
	if ((${#missing[@]} == 0)); then
		echo "client tools present"
		return
	fi
	if [[ ${PIMAIL_TEST_SKIP_CLIENTS:-} == 1 ]]; then
		echo "missing ${missing[*]}: not installing (PIMAIL_TEST_SKIP_CLIENTS=1)"
		return
	fi
	local sudo=()
	if [[ $(id -u) != 0 ]]; then
		sudo=(sudo -n)
	fi
	echo "installing ${missing[*]}"
	# Postfix is only a test peer (interop tests run their own instance
	# with its own configuration): no system configuration, no service.
	echo "postfix postfix/main_mailer_type select No configuration" | "${sudo[@]}" debconf-set-selections
	# Wait for another apt-get (a second checkout's run) instead of failing.
	local apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600)
	"${apt[@]}" update -qq
	"${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

step "client tools"
install_clients

step "gofmt"
unformatted=$(gofmt -l .)
if [[ -n $unformatted ]]; then
	echo "gofmt: these files are not formatted (run gofmt -w):"
	echo "$unformatted"
	exit 1
fi

step "go vet"
go vet ./...

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# go vet has type-checked every package (bench tools too) for amd64; the
# binary is what must build for each target.
for target in amd64 arm64 arm/7; do
	arch=${target%/*}
	arm=""
	[[ $target == */* ]] && arm=${target#*/}
	step "build GOARCH=$arch${arm:+ GOARM=$arm} CGO_ENABLED=0"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOARM=$arm go build -o "$work/pimail-$arch" ./cmd/pimail
	ls -l "$work/pimail-$arch" | awk '{print $5 " bytes  " $NF}'
done
go build -o "$work/report" ./test/report

status=0
# One line per package, every failure in full, every skip with its reason.
gotest() {
	local name=$1
	shift
	go test -json -count=1 -timeout "$TEST_TIMEOUT" "$@" | tee "$work/$name.json" | "$work/report" || status=1
}

step "unit tests"
mapfile -t unit < <(go list ./... | grep -v '^pimail/test$')
gotest unit "${unit[@]}"

# Alone, so that the timing checks (IDLE within 1 s, floods) do not
# compete with the unit tests for the CPU; inside, the tests that measure
# no time run in parallel (t.Parallel).
step "black-box tests"
PIMAIL_BIN="$work/pimail-amd64" gotest blackbox -parallel 4 ./test/

# Every fuzz target for a few seconds (crashers found earlier run as
# regression cases in the unit tests above). Longer: bash test/fuzz.sh.
step "fuzz targets"
fuzz=0
PIMAIL_FUZZTIME=${PIMAIL_FUZZTIME:-4s} bash test/fuzz.sh || fuzz=1

step "summary"
"$work/report" -summary "$work/unit.json" "$work/blackbox.json" || status=1
if ((fuzz != 0)); then
	echo "FAIL: a fuzz target found a failing input (see above)"
	status=1
fi
elapsed=$((SECONDS - start))
# The CPU time of everything this script ran: on a machine shared with
# other work the wall time says little, this says what the suite costs.
secs() { awk -v t="$1" 'BEGIN { split(t, a, "m"); sub("s", "", a[2]); printf "%.0fs", a[1] * 60 + a[2] }'; }
times >"$work/times" # in this shell: the second line is its children's
cpu_user=$(sed -n 2p "$work/times" | cut -d' ' -f1)
cpu_sys=$(sed -n 2p "$work/times" | cut -d' ' -f2)
printf 'wall time: %dm%02ds (CPU: %s user, %s system; load average now %s)\n' $((elapsed / 60)) $((elapsed % 60)) \
	"$(secs "$cpu_user")" "$(secs "$cpu_sys")" "$(cut -d' ' -f1 /proc/loadavg)"
if ((status != 0)); then
	echo "FAIL: see the output above"
else
	echo "all checks passed"
fi
exit $status
