#!/bin/bash
# How long `explain` keeps its one borrowed thread stopped, against
# `stats` on the same target, runs interleaved: a redis-server
# (jemalloc) with 100000 keys and memcached (glibc, 4 worker
# threads).  A benchmark, not a test: it prints the median and the worst
# "stopped" of --timings for each command.
#
#   bench/explain.sh [MEMSNAP] [RUNS]
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_start 31 "$@"

needs redis-server redis-cli memcached

redis-server --port 0 --unixsocket "$work/r.sock" --save '' \
	--appendonly no --dir "$work" >/dev/null 2>&1 &
rpid=$!
pids="$pids $rpid"
for _ in $(seq 100); do
	redis-cli -s "$work/r.sock" ping >/dev/null 2>&1 && break
	sleep 0.05
done
redis-cli -s "$work/r.sock" eval \
	"for i=1,100000 do redis.call('set','k'..i,string.rep('x',200)) end return 1" 0 >/dev/null

# The median and the maximum of the "stopped N us" of @cmd's --timings.
stopped() {
	sort -n "$1" | awk '{ v[NR] = $1 } END { printf "median %d us, max %d us", v[int((NR + 1) / 2)], v[NR] }'
}

measure() {
	local pid=$1 name=$2
	: >"$work/stats" ; : >"$work/explain"
	for _ in $(seq "$runs"); do
		for cmd in stats explain; do
			"$memsnap" --pid "$pid" --timings $cmd 2>&1 >/dev/null |
				sed -n 's/.* stopped \([0-9]*\) us.*/\1/p' >>"$work/$cmd"
		done
	done
	echo "$name: stats   $(stopped "$work/stats")"
	echo "$name: explain $(stopped "$work/explain")"
}

measure "$rpid" "redis-server (jemalloc)"
memcached -u root -s "$work/m.sock" -t 4 -m 128 >/dev/null 2>&1 &
mpid=$!
pids="$pids $mpid"
for _ in $(seq 100); do
	[ -S "$work/m.sock" ] && break
	sleep 0.05
done
measure "$mpid" "memcached (glibc)"
