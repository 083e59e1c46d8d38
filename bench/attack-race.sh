#!/bin/bash
# The inotify race of docs/SECURITY.md (promise 2), long: a target in its
# own user and mount namespaces bind-mounts a root directory over each
# new .memsnap-* directory the moment it appears, while memsnap runs
# dump and stats against it ROUNDS times.  Any change to the root
# directory (contents, owner, mode, times) is a win for the attacker and
# fails the run; the summary line gives rounds, memsnap's successes and
# the attacker's mounts.  CI runs 200 rounds inside `make check`.
#
#   bench/attack-race.sh [ROUNDS]        (default 1000; needs root)
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-1000}
make -s tests >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
MEMSNAP_ATTACK_ROUNDS=$rounds MEMSNAP_BIN=$PWD/memsnap \
MEMSNAP_FIXTURES=$PWD/build/fixtures MEMSNAP_TESTDATA=$PWD/tests/data \
	build/tests/integration-tests --filter 'attacker/race_*' \
	--timeout $((rounds + 60)) --verbose >"$log" 2>&1 || {
	cat "$log"
	echo "attack-race: the attacker won, or the run failed" >&2
	exit 1
}
grep -E 'race:' "$log" | sed 's/^\[----\] *//'
grep -q '^\[PASS\] attacker::race_never_wins' "$log"
echo "attack-race: 0 wins in $rounds rounds ($(($(date +%s) - start)) s)"
