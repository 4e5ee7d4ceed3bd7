#!/usr/bin/env bash
# The project's test command (README: "bash test/all.sh"); CI runs it too.
#
# Installs the client tools the tests drive (Debian's isync, mutt, swaks,
# offlineimap3, clamav-daemon for the real-clamd test, chromium for the
# webmail browser test, postfix for the interop test, sieve-connect for
# the ManageSieve test, postgresql for the store on PostgreSQL) when they are
# missing, then: gofmt check, go vet, CGO-free builds for amd64, arm64 and
# armv7 (the Raspberry Pi targets), the unit tests, and the black-box
# tests in test/, which start the real binary.
# Exits non-zero if any step fails; the go test steps all run regardless,
# so one report shows every failure.
#
# Environment: PIMAIL_TEST_SKIP_CLIENTS=1 skips installing the client tools
# and makes the tests that need them skip (quick local runs only).
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
	command -v swaks >/dev/null 2>&1 || missing+=(swaks)
	command -v script >/dev/null 2>&1 || missing+=(bsdutils)
	command -v python3 >/dev/null 2>&1 || missing+=(python3)
	command -v clamd >/dev/null 2>&1 || [[ -x /usr/sbin/clamd ]] || missing+=(clamav-daemon)
	command -v chromium >/dev/null 2>&1 || missing+=(chromium)
	command -v offlineimap >/dev/null 2>&1 || missing+=(offlineimap3)
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
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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

bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
for target in amd64 arm64 arm/7; do
	arch=${target%/*}
	arm=""
	[[ $target == */* ]] && arm=${target#*/}
	step "build GOARCH=$arch${arm:+ GOARM=$arm} CGO_ENABLED=0"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOARM=$arm go build ./...
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOARM=$arm go build -o "$bindir/pimail-$arch" ./cmd/pimail
	ls -l "$bindir/pimail-$arch" | awk '{print $5 " bytes  " $NF}'
done

status=0
step "unit tests"
mapfile -t unit < <(go list ./... | grep -v '^pimail/test$')
go test -count=1 -timeout "$TEST_TIMEOUT" "${unit[@]}" || status=1

# Alone, so that timing checks (IDLE within 1 s) do not compete with the
# unit tests for the CPU.
step "black-box tests"
go test -count=1 -timeout "$TEST_TIMEOUT" ./test/ || status=1

# Every fuzz target for a few seconds (crashers found earlier run as
# regression cases in the unit tests above).
step "fuzz targets"
PIMAIL_FUZZTIME=${PIMAIL_FUZZTIME:-4s} bash test/fuzz.sh || status=1

step "done"
if ((status != 0)); then
	echo "FAIL: see the go test output above"
else
	echo "all checks passed"
fi
exit $status
