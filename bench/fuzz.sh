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
# The unwind harness runs over libunwind built from Debian's own source
# package (1.6.2, the one memsnap links) with the same AddressSanitizer
# and libFuzzer coverage, so that a memory error inside libunwind is
# found, not only a crash; once, in $B/libunwind (apt-get source, from
# Debian's archive, with a source list of its own; dpkg-dev).  Its
# arithmetic (a DW_OP_shl by 2^40 from a hostile expression) is not
# checked: it touches no memory, and only libunwind could change it.
# LIBUNWIND=system skips that build.
#
#   bench/fuzz.sh [DURATION [HARNESS...]]   (default 600 s, all eight)
#   JOBS=2 bench/fuzz.sh ...                 fuzzing processes at once
set -eu
cd "$(dirname "$0")/.."

secs=${1:-600}
[ $# -gt 0 ] && shift
harnesses=${*:-maps elf elf-debugdata profile unwind ehfile patch patch-aarch64 stats smaps series hsperf}
B=build-fuzz

command -v clang-14 >/dev/null || { echo "bench: clang-14 is missing" >&2; exit 1; }

# Debian's libunwind, instrumented: $B/libunwind/lib/*.a
libunwind() {
	lu=$PWD/$B/libunwind
	[ -f "$lu/lib/libunwind.a" ] && return 0
	command -v dpkg-source >/dev/null ||
		{ echo "bench: dpkg-source (dpkg-dev) is missing" >&2; return 1; }
	rm -rf "$lu" && mkdir -p "$lu/apt/lists/partial" "$lu/src"
	echo "deb-src http://deb.debian.org/debian bookworm main" \
		>"$lu/apt/sources.list"
	apt="-o Dir::Etc::SourceList=$lu/apt/sources.list
	     -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$lu/apt/lists"
	# shellcheck disable=SC2086
	(cd "$lu/src" && apt-get -qq $apt update &&
		apt-get -qq $apt source --download-only libunwind=1.6.2-3 &&
		dpkg-source -x libunwind_1.6.2-3.dsc tree) >/dev/null 2>&1 ||
		{ echo "bench: could not get libunwind's source" >&2; return 1; }
	(cd "$lu/src/tree" &&
		CC=clang-14 CFLAGS="-O1 -g -fno-omit-frame-pointer \
-fsanitize=address,bounds,alignment,null -fsanitize=fuzzer-no-link" \
		./configure --prefix="$lu" --disable-shared --enable-static \
			--disable-minidebuginfo --disable-zlibdebuginfo \
			--disable-tests --disable-documentation \
			--disable-coredump --disable-setjmp &&
		make -j2 && make install) >"$lu/build.log" 2>&1 ||
		{ echo "bench: libunwind's build failed: $lu/build.log" >&2; return 1; }
}
if [ "${LIBUNWIND:-}" != system ] && libunwind; then
	arch=$(uname -m)
	make -j2 B=$B \
		FUZZ_LIBUNWIND="$PWD/$B/libunwind/lib/libunwind-$arch.a $PWD/$B/libunwind/lib/libunwind.a" \
		fuzz >/dev/null
	echo "unwind: over libunwind 1.6.2 built with AddressSanitizer"
else
	make -j2 B=$B fuzz >/dev/null
	echo "unwind: over the system's libunwind (a crash is all that shows)"
fi
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
	dict=tests/fuzz/${h%-debugdata}.dict
	[ "$h" = ehfile ] && dict=tests/fuzz/elf.dict
	[ -f "$dict" ] && dict="-dict=$dict" || dict=
	# patch: a function body, swept linearly; longer adds only time
	len=16384
	case $h in patch*) len=4096 ;; esac
	# shellcheck disable=SC2086
	"$B/fuzz/fuzz-$h" -fork="${JOBS:-1}" -ignore_crashes=1 -ignore_timeouts=1 \
		-ignore_ooms=1 -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len="$len" \
		$dict \
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
