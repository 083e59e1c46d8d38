#!/bin/bash
# End to end: `memsnap --pid N dump` against
# `gdb -p N -batch -ex 'call (int)mallctl("prof.dump",0,0,0,0)'` on the
# same redis-server (Debian's, on libjemalloc.so.2, MALLOC_CONF=prof:true,
# 200k keys), in one run.
#
#   bench/dump.sh      (root; needs redis-server, hyperfine, gdb)
#   MEMSNAP=build-x/memsnap bench/dump.sh   another build
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib-redis.sh
for tool in hyperfine gdb redis-server redis-cli redis-benchmark; do
	command -v "$tool" >/dev/null || { echo "bench/dump.sh: needs $tool" >&2; exit 1; }
done
memsnap_bin
start_redis
trap stop_redis EXIT
fill_redis 200000
pid=$REDIS_PID
out=$REDIS_DIR/memsnap.heap
echo "target: redis-server pid $pid, $(grep Threads /proc/$pid/status | tr -s '\t ' ' '), RSS $(($(grep VmRSS /proc/$pid/status | tr -s ' ' | cut -d' ' -f2) / 1024)) MB"

hyperfine -N --warmup 3 --min-runs 30 --export-json "$REDIS_DIR/m.json" \
	"$MEMSNAP --pid $pid dump -o $out" >/dev/null
hyperfine --warmup 1 --runs 10 --export-json "$REDIS_DIR/g.json" \
	"$(gdb_dump_cmd "$pid")" >/dev/null
redis-cli -p "$REDIS_PORT" ping | grep -q PONG || { echo "redis died" >&2; exit 1; }

m=$(mean_s "$REDIS_DIR/m.json")
g=$(mean_s "$REDIS_DIR/g.json")
awk -v m="$m" -v g="$g" 'BEGIN {
	printf "memsnap dump   %8.2f ms\n", m * 1000
	printf "gdb (anchor)   %8.2f ms\n", g * 1000
	printf "ratio          gdb / memsnap = %.0fx\n", g / m
}'
$MEMSNAP --pid "$pid" --timings dump -o "$out" 2>&1 >/dev/null | sed 's/^memsnap: //'
