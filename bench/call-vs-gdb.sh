#!/bin/sh
# memsnap call vs gdb's call on the same process: end-to-end time, how
# long the borrowed thread is stopped, and how both grow with the
# target's thread count.  A benchmark, not a test: it prints numbers and
# ratios from one run on this machine.
#
#   bench/call-vs-gdb.sh [MEMSNAP] [RUNS]
#
# Needs gdb and a C compiler.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_start 20 "$@"

command -v gdb >/dev/null || { echo "gdb not installed: nothing to compare"; exit 1; }
cc -O2 -pthread -o "$work/call_target" "$here/call_target.c"

start_target() {	# $1: threads; sets $pid
	"$work/call_target" "$1" > "$work/pid.$1" &
	pids="$pids $!"
	while [ ! -s "$work/pid.$1" ]; do sleep 0.01; done
	pid=$(cat "$work/pid.$1")
}

# Mean wall time in ms of "$@" over $runs runs (each must succeed).
wall_ms() {
	t0=$(date +%s%N)
	i=0
	while [ $i -lt "$runs" ]; do
		"$@" >"$work/out" 2>&1 || { cat "$work/out" >&2; exit 1; }
		i=$((i + 1))
	done
	t1=$(date +%s%N)
	echo "$t0 $t1 $runs" | awk '{ printf "%.2f", ($2 - $1) / $3 / 1e6 }'
}

# Median "tid N stopped X us" (the call included) over $runs memsnap --timings calls.
stopped_us() {
	i=0
	: > "$work/stops"
	while [ $i -lt "$runs" ]; do
		"$memsnap" --timings --pid "$1" call getpid 2>&1 >/dev/null |
			sed -n 's/.* stopped \([0-9]*\) us.*/\1/p' >> "$work/stops"
		i=$((i + 1))
	done
	sort -n "$work/stops" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

printf '%-8s %14s %14s %8s %18s\n' threads "memsnap ms" "gdb ms" ratio \
	"memsnap stop us"
for n in 10 1000; do
	start_target "$n"
	m=$(wall_ms "$memsnap" --pid "$pid" call getpid)
	g=$(wall_ms gdb -nx -p "$pid" -batch -ex 'call (int)getpid()')
	s=$(stopped_us "$pid")
	printf '%-8s %14s %14s %8s %18s\n' "$n" "$m" "$g" \
		"$(echo "$g $m" | awk '{ printf "%.0fx", $1 / $2 }')" "$s"
	kill -9 "$pid"
done
echo
echo "memsnap stops ONE thread for 'memsnap stop us' (median of $runs);"
echo "gdb stops every thread for about its whole run time."
