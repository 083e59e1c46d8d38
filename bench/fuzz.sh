#!/bin/sh
# The long fuzz run: each harness of tests/fuzz for DURATION seconds, one
# after the other, continuing past crashes (libFuzzer's fork mode), and a
# table of what it did:
#
#   harness         executions   exec/s      cov       ft  corpus  crashes  timeouts  ooms
#
# The corpus grows across runs in build-fuzz/fuzz/long/HARNESS/corpus
# (seeded from tests/fuzz/corpus, never written back there); crash,
# timeout and OOM inputs land beside it.  Minimize one with
#   build-fuzz/fuzz/fuzz-HARNESS -minimize_crash=1 -runs=100000 \
#       -exact_artifact_path=OUT INPUT
# and commit it under tests/fuzz/regressions/HARNESS/.
#
#   bench/fuzz.sh [DURATION [HARNESS...]]   (default 600 s, all four)
set -eu
cd "$(dirname "$0")/.."

secs=${1:-600}
[ $# -gt 0 ] && shift
harnesses=${*:-maps elf elf-debugdata profile}
B=build-fuzz

command -v clang-14 >/dev/null || { echo "bench: clang-14 is missing" >&2; exit 1; }
make -j2 B=$B fuzz >/dev/null
MEMSNAP_FUZZ_ROOT=$PWD/tests/data/profiles/root
export MEMSNAP_FUZZ_ROOT
unset DEBUGINFOD_URLS
ASAN_OPTIONS=detect_leaks=1
UBSAN_OPTIONS=print_stacktrace=1
export ASAN_OPTIONS UBSAN_OPTIONS

# fork mode keeps its jobs in $TMPDIR; give it one of ours to sweep.
tmp=$(mktemp -d /tmp/memsnap-fuzz-long.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp"

printf '%-15s %12s %8s %8s %8s %7s %8s %9s %5s\n' harness executions \
	exec/s cov ft corpus crashes timeouts ooms
for h in $harnesses; do
	dir=$B/fuzz/long/$h
	mkdir -p "$dir/corpus" "$dir/artifacts"
	cp tests/fuzz/corpus/"$h"/* "$dir/corpus/"
	log=$dir/last.log
	"$B/fuzz/fuzz-$h" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 \
		-ignore_ooms=1 -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=16384 \
		-dict="tests/fuzz/${h%-debugdata}.dict" \
		-artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$log" 2>&1 ||
		true
	# "#123456: cov: 708 ft: 1299 corp: 326 exec/s 10972
	#  oom/timeout/crash: 0/0/0 time: 106s job: 13 dft_time: 0"
	last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1)
	if [ -z "$last" ]; then
		printf '%-15s did not run; see %s\n' "$h" "$log"
		continue
	fi
	echo "$last" | awk -v h="$h" '{
		n = substr($1, 2) + 0
		split($11, c, "/")
		t = $13; sub("s", "", t)
		printf "%-15s %12d %8d %8d %8d %7d %8d %9d %5d\n", h, n,
			(t > 0 ? n / t : 0), $3, $5, $7, c[3], c[2], c[1]
	}'
done
echo "inputs that failed: $B/fuzz/long/*/artifacts/; logs: $B/fuzz/long/*/last.log"
