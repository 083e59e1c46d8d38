#!/bin/bash
# Cost against the target's thread count: `memsnap dump` and the gdb
# anchor on tests/fixtures/jemalloc_target.c started with 10 and with
# 1000 idle threads (MALLOC_CONF=prof:true).  memsnap stops one thread,
# so the time the target is stopped should stay flat; gdb stops them all
# for its whole run.  memsnap's wall time also counts reading
# /proc/PID/task/* to choose the thread, which grows with the thread
# count but stops nothing.
#
#   bench/threads.sh      (root; needs hyperfine, gdb)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib-redis.sh
for tool in hyperfine gdb; do
	command -v "$tool" >/dev/null || { echo "bench/threads.sh: needs $tool" >&2; exit 1; }
done
memsnap_bin
dir=$(mktemp -d /tmp/memsnap-bench-threads.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

for n in 10 1000; do
	mkfifo "$dir/ready"
	(cd "$dir" && MALLOC_CONF=prof:true exec "$OLDPWD/$FIXTURES/jemalloc-target" \
		--threads "$n" > "$dir/ready") &
	pid=$!
	read -r _ < "$dir/ready"
	rm "$dir/ready"
	threads=$(grep Threads "/proc/$pid/status" | tr -dc 0-9)
	hyperfine -N --warmup 3 --min-runs 20 --export-json "$dir/m$n.json" \
		"$MEMSNAP --pid $pid dump -o $dir/m.heap" >/dev/null
	hyperfine --warmup 1 --runs 5 --export-json "$dir/g$n.json" \
		"$(gdb_dump_cmd "$pid")" >/dev/null
	kill -0 "$pid" || { echo "the target died" >&2; exit 1; }
	# The median time the borrowed thread was stopped, from --timings.
	stopped=$(for _ in $(seq 15); do
		"$MEMSNAP" --pid "$pid" --timings dump -o "$dir/m.heap" 2>&1 >/dev/null |
			sed -n 's/.* stopped \([0-9]*\) us.*/\1/p'
	done | sort -n | sed -n 8p)
	echo "$n $threads $(mean_s "$dir/m$n.json") $(mean_s "$dir/g$n.json") $stopped"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
done | awk '
	{ t[NR] = $2; m[NR] = $3; g[NR] = $4; s[NR] = $5 }
	END {
		printf "%8s %12s %18s %12s %9s\n", "threads", "memsnap ms", "1 thread stopped ms", "gdb ms", "gdb/memsnap"
		for (i = 1; i <= NR; i++)
			printf "%8d %12.2f %18.2f %12.2f %8.0fx\n", t[i], m[i] * 1000, s[i] / 1000, g[i] * 1000, g[i] / m[i]
		printf "growth 10 -> 1000 threads: memsnap wall %.2fx, memsnap stop %.2fx, gdb (all threads stopped) %.2fx\n", m[2] / m[1], s[2] / s[1], g[2] / g[1]
	}'
