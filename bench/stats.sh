#!/bin/bash
# memsnap stats and trim against gdb doing the same calls, on a live
# memcached (glibc malloc, 4 worker threads, 3 MB of data) and on
# redis-server (jemalloc).  A benchmark, not a test: it prints mean
# wall times and their ratio from one run on this machine.
#
#   bench/stats.sh [MEMSNAP] [RUNS]
#
# Needs memcached, redis-server and gdb.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_start 20 "$@"

needs gdb memcached redis-server redis-cli

# Mean wall time in ms of "$@" over $runs runs (each must succeed).
wall_ms() {
	t0=$(date +%s%N)
	i=0
	while [ $i -lt "$runs" ]; do
		"$@" >"$work/out" 2>&1 || { cat "$work/out" >&2; exit 1; }
		i=$((i + 1))
	done
	t1=$(date +%s%N)
	echo $(((t1 - t0) / runs / 1000)) | awk '{ printf "%.1f", $1 / 1000 }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0fx", b / a }'; }

port=$((20000 + $$ % 10000))
memcached -u root -l 127.0.0.1 -p "$port" -t 4 -m 128 >/dev/null 2>&1 &
pids="$pids $!"
mc=$!
redis-server --port 0 --unixsocket "$work/redis.sock" --save '' \
	--daemonize no >/dev/null 2>&1 &
pids="$pids $!"
rd=$!
until [ -S "$work/redis.sock" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
	sleep 0.01
done
# Some data: 100k keys of 1 KiB in redis, a few thousand in memcached.
redis-cli -s "$work/redis.sock" eval \
	"for i=1,100000 do redis.call('set','k'..i,string.rep('x',1024)) end" 0 >/dev/null
exec 3<>"/dev/tcp/127.0.0.1/$port"
val=$(printf '%01024d' 0)
for i in $(seq 1 3000); do
	printf 'set k%d 0 0 1024 noreply\r\n%s\r\n' "$i" "$val" >&3
done
printf 'get k3000\r\n' >&3
head -c 1 <&3 >/dev/null
exec 3>&-

echo "runs: $runs"
m1=$(wall_ms "$memsnap" --pid "$mc" stats)
g1=$(wall_ms gdb -p "$mc" -batch -ex 'call (int)malloc_info(0, (void*)stderr)')
echo "memcached stats: memsnap $m1 ms, gdb call malloc_info $g1 ms ($(ratio "$m1" "$g1"))"
m2=$(wall_ms "$memsnap" --pid "$mc" trim)
g2=$(wall_ms gdb -p "$mc" -batch -ex 'call (int)malloc_trim(0)')
echo "memcached trim:  memsnap $m2 ms, gdb call malloc_trim $g2 ms ($(ratio "$m2" "$g2"))"
m3=$(wall_ms "$memsnap" --pid "$rd" stats --raw)
g3=$(wall_ms gdb -p "$rd" -batch -ex 'call (void)malloc_stats_print(0, 0, 0)')
echo "redis stats --raw: memsnap $m3 ms, gdb call malloc_stats_print $g3 ms ($(ratio "$m3" "$g3"))"
"$memsnap" --pid "$rd" --timings stats --raw 2>&1 >/dev/null | sed 's/^/  /'
"$memsnap" --pid "$mc" --timings stats 2>&1 >/dev/null | sed 's/^/  /'
