#!/bin/bash
# What a client sees: one redis client doing GET after GET (bench/getloop.c)
# for SECONDS seconds while a dump is taken every 0.5 s — with no dumps,
# with memsnap, with gdb — on the same redis-server.  Max latency is the
# stall a dump causes.
#
#   bench/stall.sh [SECONDS]     (root; needs redis-server, gdb, cc)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib-redis.sh
secs=${1:-10}
for tool in gdb redis-server redis-cli redis-benchmark cc; do
	command -v "$tool" >/dev/null || { echo "bench/stall.sh: needs $tool" >&2; exit 1; }
done
memsnap_bin
start_redis
trap stop_redis EXIT
fill_redis 200000
pid=$REDIS_PID
cc -O2 -o "$REDIS_DIR/getloop" bench/getloop.c

# run_phase NAME DUMP-COMMAND: the client's numbers, and how many dumps.
run_phase() {
	local name=$1 cmd=$2 client dumps=0
	"$REDIS_DIR/getloop" "$REDIS_PORT" "$secs" > "$REDIS_DIR/$name.txt" &
	client=$!
	sleep 0.5
	while kill -0 "$client" 2>/dev/null; do
		if [ -n "$cmd" ]; then
			eval "$cmd" >/dev/null 2>&1 || echo "$name: a dump failed" >&2
			dumps=$((dumps + 1))
		fi
		sleep 0.5
	done
	wait "$client"
	echo "$name dumps $dumps $(cat "$REDIS_DIR/$name.txt")"
}

echo "target: redis-server pid $pid; one client, GET loop, $secs s per phase"
{
	run_phase none ""
	run_phase memsnap "$MEMSNAP --pid $pid dump -o $REDIS_DIR/m.heap"
	run_phase gdb "$(gdb_dump_cmd "$pid")"
} | awk '
	{ v[$1] = $0; max[$1] = $9; p99[$1] = $11; n[$1] = $5; d[$1] = $3; e[$1] = $7 }
	END {
		printf "%-8s %6s %9s %7s %10s %10s\n", "dumps", "taken", "requests", "errors", "p99 ms", "max ms"
		split("none memsnap gdb", k, " ")
		for (i = 1; i <= 3; i++)
			printf "%-8s %6d %9d %7d %10.3f %10.3f\n", k[i], d[k[i]], n[k[i]], e[k[i]], p99[k[i]], max[k[i]]
		printf "max latency: memsnap / none = %.1fx, gdb / memsnap = %.0fx\n",
			max["memsnap"] / max["none"], max["gdb"] / max["memsnap"]
	}'
redis-cli -p "$REDIS_PORT" ping | grep -q PONG || { echo "redis died" >&2; exit 1; }
