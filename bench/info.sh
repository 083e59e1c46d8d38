#!/bin/bash
# memsnap --pid N info --no-attach on Debian's mariadbd (26 MB stripped
# C++ server, jemalloc preloaded): wall time and peak RSS of finding every
# allocator without stopping the process, against gdb resolving the same
# three jemalloc functions in the same run.  Then the full info, which
# also borrows one thread for jemalloc's runtime state.
#
#   bench/info.sh            (root; needs mariadb-server-core, hyperfine, gdb)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
needs hyperfine gdb /usr/sbin/mariadbd /usr/bin/time
make -s memsnap
start_mariadbd
trap stop_mariadbd EXIT
pid=$MARIADB_PID
echo "target: mariadbd pid $pid, $(grep Threads /proc/$pid/status | tr -s '\t ' ' '), $(stat -c %s /usr/sbin/mariadbd) bytes"

gdb_cmd="gdb -nx -p $pid -batch -ex 'info address mallctl' -ex 'info address mallctlnametomib' -ex 'info address malloc_stats_print'"
hyperfine -N --warmup 3 --min-runs 30 --export-json /tmp/memsnap-info.json \
	"./memsnap --pid $pid info --no-attach" >/dev/null
hyperfine -N --warmup 3 --min-runs 30 --export-json /tmp/memsnap-info-rt.json \
	"./memsnap --pid $pid info" >/dev/null
hyperfine --warmup 1 --runs 5 --export-json /tmp/memsnap-gdb.json "$gdb_cmd" >/dev/null

mean() { grep -m1 '"mean"' "$1" | sed 's/.*: //; s/,//'; }
m=$(mean /tmp/memsnap-info.json)
g=$(mean /tmp/memsnap-gdb.json)
r=$(mean /tmp/memsnap-info-rt.json)
rss=$(peak_rss_kb ./memsnap --pid "$pid" info --no-attach)
awk -v m="$m" -v r="$r" -v g="$g" -v rss="$rss" 'BEGIN {
	printf "memsnap info --no-attach %8.2f ms   peak RSS %.1f MB\n", m * 1000, rss / 1024
	printf "memsnap info (runtime)   %8.2f ms\n", r * 1000
	printf "gdb (anchor)   %8.2f ms\n", g * 1000
	printf "ratio          gdb / memsnap = %.0fx\n", g / m
}'
