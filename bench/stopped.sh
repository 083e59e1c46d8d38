#!/bin/bash
# How long memsnap keeps its one borrowed thread stopped, on an idle
# machine and on one whose every core is busy: `stats` (one borrowed
# thread, a few calls) RUNS times on a redis-server (jemalloc, 100000
# keys, serving a client the whole time) and on mariadbd (Debian's, in
# bootstrap mode: its main thread reads SQL, its other threads sleep),
# first with nothing else running, then beside one busy loop per core.
# Prints the median, the 90th percentile and the worst "stopped" of
# --timings, and which thread was borrowed (the main one or another).
# A benchmark, not a test.
#
#   bench/stopped.sh [MEMSNAP] [RUNS]      (root; default 51)
#
# Needs redis-server, redis-cli, redis-benchmark and mariadb-server-core.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_start 51 "$@"
needs redis-server redis-cli redis-benchmark /usr/sbin/mariadbd
cd "$here/.."
# shellcheck source=bench/lib-redis.sh
. bench/lib-redis.sh

# percentiles of the numbers on stdin: "median p90 max" in ms
summary() {
	sort -n | awk '{ v[NR] = $1 } END {
		printf "median %.2f ms, p90 %.2f ms, max %.2f ms",
		    v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.9 + 0.5)] / 1000,
		    v[NR] / 1000 }'
}

# measure NAME PID: RUNS stats, their stopped times and borrowed tids
measure() {
	local name=$1 pid=$2 i main=0
	: >"$work/us"
	for i in $(seq "$runs"); do
		"$memsnap" --pid "$pid" --timings stats 2>"$work/err" >/dev/null
		sed -n 's/.*tid \([0-9]*\) stopped \([0-9]*\) us.*/\1 \2/p' \
			"$work/err" >"$work/one"
		read -r tid us <"$work/one"
		echo "$us" >>"$work/us"
		[ "$tid" = "$pid" ] && main=$((main + 1))
	done
	printf '%-24s %s; main thread borrowed %d of %d\n' "$name" \
		"$(summary <"$work/us")" "$main" "$runs"
}

hogs() {
	local i
	for i in $(seq "$(nproc)"); do
		sh -c 'while :; do :; done' &
		pids="$pids $!"
		hog_pids="$hog_pids $!"
	done
}

start_redis
pids="$pids $REDIS_PID"
fill_redis 100000
redis-benchmark -p "$REDIS_PORT" -t get -n 100000000 -c 1 -q \
	>/dev/null 2>&1 &
pids="$pids $!"
start_mariadbd
pids="$pids $MARIADB_PID $MARIADB_HOLD"

echo "idle machine (but for a redis client):"
measure "  redis (jemalloc)" "$REDIS_PID"
measure "  mariadbd" "$MARIADB_PID"
hog_pids=
hogs
echo "every core busy ($(nproc) loops):"
measure "  redis (jemalloc)" "$REDIS_PID"
measure "  mariadbd" "$MARIADB_PID"
# shellcheck disable=SC2086
kill $hog_pids
stop_mariadbd
stop_redis
